"""Where a published row's priced compute goes: the compute stream's busy time on rank 0,
summed by layer kind and by op.

`lumos estimate` reports compute against exposed communication; this splits the compute.
Each kernel node of rank 0's generated step (`lumos.simulator.workload.step.generate`) is
keyed by the kind of the layer it belongs to (a hybrid model's pattern letter: `M`
Mamba-2, `*` attention, `-` MLP, `E` MoE; `layer` for every layer of a plain decoder;
`other` for the embedding, output layer, loss and optimizer) and by its name with the
layer number and micro-batch digits folded (`layer12.in_proj.wgrad` -> `in_proj.wgrad`,
`fc1` and `fc2` -> `fc#`). The times are the priced kernel durations, not a simulation:
they add up to the stream's busy time, what overlap hides is not taken off. With pipeline
parallelism rank 0 holds the first stage only. A diagnosis tool (docs/estimate.md,
"Hybrid Mamba-2 / Transformer models", "Where the time goes"): nothing here is fitted.

    python scripts/op_breakdown.py --hybrid DGXC-NH56B-256 [--top 30] [--json OUT]
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from lumos.simulator.workload import ParallelPlan
from lumos.simulator.workload.block import COMPUTE
from lumos.simulator.workload.spec import ModelSpec
from lumos.simulator.workload.step import generate

sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_published as vp

_LAYER = re.compile(r"layer(\d+)\.")


@dataclass(frozen=True, slots=True)
class OpTime:
    """One op class: its layer kind, folded name, summed seconds and kernel count."""

    kind: str
    op: str
    seconds: float
    kernels: int


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Rank 0's compute-stream busy time (s), by layer kind and by op (largest first)."""

    busy_s: float
    by_kind: dict[str, float]
    ops: list[OpTime]

    def seconds(self, op: str, kind: str | None = None) -> float:
        """Summed seconds of the ops named `op` (of layer kind `kind`, else of every kind)."""
        return sum(o.seconds for o in self.ops if o.op == op and kind in (None, o.kind))


def _key(name: str, pattern: str) -> tuple[str, str]:
    """(layer kind, folded op name) of a node name (module doc)."""
    m = _LAYER.search(name)
    if m is None:
        return "other", re.sub(r"\d+", "#", name)
    index = int(m.group(1))
    kind = pattern[index] if pattern else "layer"
    return kind, re.sub(r"\d+", "#", name[m.end() :])


def breakdown(model: ModelSpec, plan: ParallelPlan, hw: str) -> Breakdown:
    """Rank 0's priced compute of one step of `plan`, split by layer kind and op."""
    graph = generate(model, plan, hw).graphs[0]
    pattern = model.pattern or ""
    secs: dict[tuple[str, str], float] = defaultdict(float)
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for i in range(len(graph.ids)):
        if graph.stream[i] != COMPUTE or graph.dur_ns[i] <= 0:
            continue
        key = _key(graph.names[graph.name_idx[i]], pattern)
        secs[key] += graph.dur_ns[i] / 1e9
        counts[key] += 1
    ops = [OpTime(k, o, s, counts[(k, o)]) for (k, o), s in secs.items()]
    ops.sort(key=lambda t: -t.seconds)
    by_kind: dict[str, float] = defaultdict(float)
    for t in ops:
        by_kind[t.kind] += t.seconds
    return Breakdown(sum(secs.values()), dict(by_kind), ops)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rows", nargs="+", help="row ids")
    ap.add_argument("--csv", type=Path, default=None)
    for name in vp.SETS:
        ap.add_argument(f"--{name.replace('_', '-')}", dest=name, action="store_true")
    ap.add_argument("--top", type=int, default=30, help="ops listed")
    ap.add_argument("--json", type=Path, default=None, help="write the breakdowns here")
    args = ap.parse_args()
    path = args.csv or next((f for n, f in vp.SETS.items() if getattr(args, n)), vp.CSV)
    found = {r["row_id"]: r for r in csv.DictReader(path.open()) if r["row_id"] in args.rows}
    out: dict[str, object] = {}
    for rid in args.rows:
        row = vp.parse(found[rid]) if rid in found else f"no row {rid} in {path.name}"
        if isinstance(row, str):
            print(f"{rid}: {row}")
            continue
        b = breakdown(row.model, row.plan, row.hw)
        out[rid] = asdict(b)
        print(f"{rid}: compute-stream busy {b.busy_s:.3f} s (published step {row.published_s} s)")
        for kind, s in sorted(b.by_kind.items(), key=lambda kv: -kv[1]):
            label = "outside the layers" if kind == "other" else f"{kind} layers"
            print(f"  {label:>18} {s:8.3f} s {100 * s / b.busy_s:5.1f} %")
        for t in b.ops[: args.top]:
            share = 100 * t.seconds / b.busy_s
            print(f"  {t.seconds:8.3f} s {share:5.1f} %  x{t.kernels:<6} {t.kind:>6} {t.op}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
