"""Which kernel class could explain a group's error: scale one kernel-physics parameter.

Re-estimates the rows of a published-runs CSV (`validate_published.py`'s files, parsed by
its `parse`) with one field of every GPU's kernel physics (`hwconfigs/kernels/<gpu>.yaml`)
multiplied by a factor, and prints each group's mean signed error per setting. A diagnosis
tool, never a calibration: a factor that fixes one group and breaks another says the cause
is not that kernel class (docs/estimate.md, "The A100 control of the llm-foundry rows").

    python scripts/physics_sensitivity.py --heldout2 --groups G4,G9 \\
        none memory_efficiency=0.5 gemm_efficiency_bf16=0.85 [--gpu h100]

A setting may scale several fields together: `attention_fwd_efficiency=2,attention_bwd_efficiency=2`.

`--gpu` restricts the scaling to one shipped system's GPU (the others keep their files).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections import defaultdict
from dataclasses import fields, replace
from pathlib import Path

from lumos.hwconfigs.kernel_tables import KernelPhysics, kernel_physics_of
from lumos.hwconfigs.load import load_system
from lumos.simulator.workload import estimate

sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_published as vp


def _setting(text: str) -> dict[str, float]:
    """`field=factor[,field=factor ...]` (fields scaled together), or `none` (the files)."""
    if text == "none":
        return {}
    out = {}
    for part in text.split(","):
        name, _, factor = part.partition("=")
        if name not in {f.name for f in fields(KernelPhysics)}:
            raise SystemExit(f"unknown kernel-physics field {name!r}")
        out[name] = float(factor)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("settings", nargs="+", help="none | field=factor[,field=factor]")
    ap.add_argument("--heldout2", action="store_true")
    ap.add_argument("--csv", type=Path, default=None)
    ap.add_argument("--groups", default="", help="group-name prefixes, comma-separated")
    ap.add_argument("--gpu", default=None, help="scale only this system's GPU (e.g. h100)")
    args = ap.parse_args()
    path = args.csv or (vp.HELDOUT2 if args.heldout2 else vp.CSV)
    rows = [
        r
        for r in csv.DictReader(path.open())
        if not args.groups or r.get("group", "").startswith(tuple(args.groups.split(",")))
    ]
    parsed = [(r, vp.parse(r)) for r in rows]
    cases = [(r, row) for r, row in parsed if not isinstance(row, str)]
    gpus = {hw: load_system(hw).gpu.name for hw in {row.hw for _, row in cases}}
    for text in args.settings:
        scale = _setting(text)
        errors: dict[str, list[float]] = defaultdict(list)
        for r, row in cases:
            physics = kernel_physics_of(gpus[row.hw])
            if scale and (args.gpu is None or args.gpu == row.hw):
                physics = replace(physics, **{k: getattr(physics, k) * f for k, f in scale.items()})
            est = estimate(row.model, row.plan, row.hw, physics=physics)
            errors[r.get("group", "")].append(est.iteration_time_s / row.published_s - 1)
        cells = "  ".join(
            f"{g.split(' ')[0]} {100 * statistics.mean(e):+.1f} %" for g, e in errors.items()
        )
        print(f"{text:32s} {cells}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
