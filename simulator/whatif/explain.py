"""What structure recovery found, and what it did not, as rows for people and JSON."""

from __future__ import annotations

from collections import Counter
from typing import Any

from lumos.simulator.whatif.api import Recovered


def explain(rec: Recovered) -> dict[str, Any]:
    """Per rank: phases (node counts), layers and how they were found, repeats, notes;
    per group: role and why; the model sizes read from the trace."""
    ranks = []
    for s in rec.structures:
        ranks.append(
            {
                "rank": s.rank,
                "phases": dict(Counter(s.phase)),
                "layers": s.layers,
                "layers_from": s.layer_source,
                "repeats": {
                    p: {"start": r.start, "ops_per_layer": r.period, "count": r.count}
                    for p, r in s.repeats.items()
                },
                "microbatches": len({m for m in s.microbatch if m >= 0}),
                "notes": list(s.notes),
            }
        )
    groups = [
        {
            "ranks": list(g.members),
            "role": g.role,
            "collectives": g.collectives,
            "bytes": g.bytes,
            "why": g.reason,
        }
        for g in rec.roles
    ]
    dims = rec.dims
    return {
        "ranks": ranks,
        "groups": groups,
        "dims": None
        if dims is None
        else {"batch": dims.batch, "seq": dims.seq, "hidden": dims.hidden, "heads": dims.heads},
    }


def explain_lines(rec: Recovered) -> list[str]:
    """The same as short lines of text."""
    info = explain(rec)
    lines = []
    for r in info["ranks"]:
        phases = ", ".join(f"{k} {v}" for k, v in sorted(r["phases"].items()))
        reps = "; ".join(
            f"{p}: {v['count']} x {v['ops_per_layer']} ops" for p, v in r["repeats"].items()
        )
        lines.append(
            f"rank {r['rank']}: {phases} | layers {r['layers']} ({r['layers_from']}"
            + (f"; {reps}" if reps else "")
            + f") | micro-batches {r['microbatches'] or 'not found'}"
        )
        lines += [f"  not recognised: {n}" for n in r["notes"]]
    for g in info["groups"]:
        lines.append(
            f"group {g['ranks']}: {g['role']} ({g['why']}), {g['collectives']} ops, {g['bytes']:,} B"
        )
    roles = {g["role"] for g in info["groups"]}
    cp = "all-to-all inside layers found, but" if "cp" in roles else "no all-to-all inside layers;"
    lines.append(f"context parallel: {cp} no edit changes its degree (there is no --cp)")
    lines.append("sequence parallel: not recognised (--tp adds plain all-reduces)")
    if any(r["microbatches"] for r in info["ranks"]):
        lines.append("pipeline: already staged; --pp cannot re-stage it")
    d = info["dims"]
    lines.append(
        "sizes: not found (no layer norm in the layers)"
        if d is None
        else f"sizes: batch {d['batch']}, sequence {d['seq']}, hidden {d['hidden']}, heads {d['heads']}"
    )
    return lines
