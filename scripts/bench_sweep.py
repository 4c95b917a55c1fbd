"""Benchmark of `lumos sweep`: plans per second on a 70B-class job, and scaling with workers.

    python scripts/bench_sweep.py                 # >= 1,000 plans, Llama 3.1 70B on 512 H100s
    python scripts/bench_sweep.py --ray           # + Ray local cluster, 1 vs 2 workers (small grid)
    python scripts/bench_sweep.py --quick         # a small grid, for a smoke run

Baselines measured in the same process: the wall time of one full estimate of a
reference plan (what a sweep would cost run one plan after another), and for the Ray
scaling the same grid with one worker. Printed: plans enumerated / sized / simulated,
wall time, plans per second, and the ratios.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from lumos.simulator.sweep.runner import sweep
from lumos.simulator.sweep.space import SweepSpace
from lumos.simulator.workload.plan import ParallelPlan, Recompute
from lumos.simulator.workload.step import estimate

FULL = SweepSpace(
    model="llama3.1-70b",
    gpus=512,
    gbs=1024,
    seq=8192,
    hw="h100",
    tp=(1, 2, 4, 8),
    pp=(1, 2, 4, 8, 16),
    cp=(1, 2, 4),
    vp=(1, 2, 4),
    mbs=(1, 2, 4),
    recompute=("none", "selective", "full"),
)
QUICK = SweepSpace(
    model="llama3.1-70b",
    gpus=512,
    gbs=1024,
    seq=8192,
    hw="h100",
    tp=(4, 8),
    pp=(4, 8),
    cp=(1,),
    vp=(1,),
    mbs=(1,),
    recompute=("selective", "full"),
)


def _run(space: SweepSpace, executor: str, workers: int) -> tuple[float, int, int, int]:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        result = sweep(space, Path(tmp) / "r.csv", executor=executor, workers=workers)
        wall = time.perf_counter() - t0
    simulated = sum(1 for r in result.rows if r.get("tokens_per_s_per_gpu") is not None)
    return wall, len(result.rows), simulated, result.failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ray", action="store_true", help="also measure Ray with 1 and 2 workers")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    space = QUICK if args.quick else FULL
    ref = ParallelPlan(tp=8, pp=8, dp=8, mbs=1, gbs=1024, seq=8192, recompute=Recompute.SELECTIVE)
    t0 = time.perf_counter()
    estimate("llama3.1-70b", ref, "h100")
    one = time.perf_counter() - t0
    print(f"baseline: one estimate of {ref.tp}/{ref.pp}/{ref.dp} (TP/PP/DP) takes {one:.2f} s")
    wall, plans, simulated, failed = _run(space, "local", args.workers)
    print(
        f"local x{args.workers}: {plans} valid plans ({simulated} simulated, "
        f"{plans - simulated - failed} sized only, {failed} failed) in {wall:.1f} s = "
        f"{plans / wall:.2f} plans/s; one after another would take ~{simulated * one:.0f} s "
        f"(ratio {simulated * one / wall:.1f}x)"
    )
    if args.ray:  # scaling on the small grid: the same plans on 1 and 2 Ray workers
        w1, n1, *_ = _run(QUICK, "ray", 1)
        w2, *_ = _run(QUICK, "ray", 2)
        print(f"ray, {n1} plans: x1 {w1:.1f} s, x2 {w2:.1f} s, speed-up {w1 / w2:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
