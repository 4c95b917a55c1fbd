"""Sweeps from a trace: a grid of what-if edits of one traced step, each simulated.

The grid is the product of the values given per edit (layers, sequence, DP, PP with its
schedule, hardware); an axis left empty keeps the traced value. Each worker process loads
and recovers the trace once and applies every point's edits to that copy, so a point costs
one edit and one simulation.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from itertools import product
from pathlib import Path
from typing import Any

from lumos.limits import MAX_SWEEP_POINTS

#: the edits a trace grid can vary (`WhatIf` field names), in key order
AXES = ("layers", "seq", "hidden", "dp", "pp", "hw")


@dataclass(frozen=True, slots=True)
class TraceSpace:
    """A traced step and the values to try per edit."""

    target: str
    layers: tuple[int, ...] = ()
    seq: tuple[int, ...] = ()
    hidden: tuple[int, ...] = ()
    dp: tuple[int, ...] = ()
    pp: tuple[int, ...] = ()
    hw: tuple[str, ...] = ()
    schedule: str = "1f1b"
    base_hw: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}
        out["target"] = str(Path(self.target).resolve())
        return out


def edit_points(space: TraceSpace) -> list[dict[str, Any]]:
    """One point per combination of the given values (the traced step itself first;
    repeated values count once). Raises ResourceLimitError past `LUMOS_MAX_SWEEP_POINTS`."""
    axes = [(name, tuple(dict.fromkeys(getattr(space, name)))) for name in AXES]
    axes = [(name, values) for name, values in axes if values]
    sizes = " x ".join(f"{name} {len(values)}" for name, values in axes)
    MAX_SWEEP_POINTS.check(math.prod(len(v) for _, v in axes), f"sweep: grid points ({sizes})")
    points = [_point(space, {})]
    for values in product(*(vals for _, vals in axes)):
        edits = {name: value for (name, _), value in zip(axes, values, strict=True)}
        points.append(_point(space, edits))
    return points


def _point(space: TraceSpace, edits: dict[str, Any]) -> dict[str, Any]:
    key = "-".join(f"{k}{v}" for k, v in edits.items()) or "traced"
    return {
        "key": key,
        "target": space.target,
        "edits": edits,
        "schedule": space.schedule,
        "base_hw": space.base_hw,
    }


_RECOVERED: dict[str, Any] = {}


def evaluate_edit(point: dict[str, Any]) -> dict[str, Any]:
    """Apply one point's edits to the (per-process cached) recovered trace and simulate.

    A lumos error (an edit the trace cannot take) becomes the row's `error`.
    """
    from lumos.errors import LumosError
    from lumos.simulator.whatif.api import WhatIf, apply_edits, recover
    from lumos.simulator.whatif.etset import load_etset, simulate_etset

    row: dict[str, Any] = {"key": point["key"], **point["edits"]}
    try:
        if point["target"] not in _RECOVERED:
            _RECOVERED[point["target"]] = recover(load_etset(point["target"]))
        rec = _RECOVERED[point["target"]]
        spec = WhatIf(schedule=point["schedule"], base_hw=point["base_hw"], **point["edits"])
        edited, _ = apply_edits(rec, spec)
        result = simulate_etset(edited)
    except LumosError as exc:
        return {**row, "error": str(exc)}
    slowest = max(result.ranks, key=lambda r: r.iteration_time_ns)
    return {
        **row,
        "ranks": len(result.ranks),
        "iteration_time_s": result.iteration_time_ns / 1e9,
        "slowest_rank": slowest.rank,
    }


def rank_edits(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows by predicted step time (failures last), with the speed-up over the trace."""
    base = next((r for r in rows if r["key"] == "traced" and not r.get("error")), None)
    out = sorted(
        rows, key=lambda r: (bool(r.get("error")), r.get("iteration_time_s") or 0.0, r["key"])
    )
    for i, row in enumerate(out, start=1):
        row["rank"] = i
        if base and row.get("iteration_time_s"):
            row["speedup_vs_trace"] = base["iteration_time_s"] / row["iteration_time_s"]
    return out


COLUMNS = (
    "rank",
    "key",
    *AXES,
    "ranks",
    "iteration_time_s",
    "speedup_vs_trace",
    "slowest_rank",
    "error",
)
