"""Benchmark of `lumos sweep`: plans per second on a 70B-class job, and scaling with workers.

    python scripts/bench_sweep.py                 # 1,377 plans, Llama 3.1 70B on 512 H100s
    python scripts/bench_sweep.py --grid medium   # 252 plans of the same job, for development
    python scripts/bench_sweep.py --grid quick    # 8 plans, a smoke run
    python scripts/bench_sweep.py --grid medium --ray  # + Ray local cluster, 1 vs 2 workers

Baselines measured in the same process: one estimate of a reference plan with every
micro-batch simulated (`exact=True`) and with the estimator's periodic short path (what
a sweep would cost run one plan after another, and what the short path saves), and for
the Ray scaling the same grid with one worker. Printed: the load average before and
after (the machine is shared), plans enumerated / sized / simulated, wall time, plans per
second, and the ratios.
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
MEDIUM = SweepSpace(
    model="llama3.1-70b",
    gpus=512,
    gbs=1024,
    seq=8192,
    hw="h100",
    tp=(4, 8),
    pp=(1, 4, 16),
    cp=(1, 2, 4),
    vp=(1, 2, 4),
    mbs=(1, 2, 4),
    recompute=("selective", "full"),
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
    ap.add_argument("--grid", choices=("full", "medium", "quick"), default="full")
    ap.add_argument("--quick", action="store_true", help="same as --grid quick")
    ap.add_argument("--ray", action="store_true", help="also measure Ray with 1 and 2 workers")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    grid = "quick" if args.quick else args.grid
    space = {"full": FULL, "medium": MEDIUM, "quick": QUICK}[grid]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; grid {grid}")
    ref = ParallelPlan(tp=8, pp=8, dp=8, mbs=1, gbs=1024, seq=8192, recompute=Recompute.SELECTIVE)
    estimate("llama3.1-70b", ref, "h100")  # warm: YAML read, imports
    t0 = time.perf_counter()
    exact = estimate("llama3.1-70b", ref, "h100", exact=True)
    full_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    short = estimate("llama3.1-70b", ref, "h100")
    one = time.perf_counter() - t0
    diff = abs(short.iteration_time_s / exact.iteration_time_s - 1)
    print(
        f"baseline: one estimate of TP{ref.tp}/PP{ref.pp}/DP{ref.dp}, {ref.microbatches} "
        f"micro-batches: every micro-batch {full_s:.2f} s, periodic "
        f"{short.stats['microbatches_simulated']} {one:.2f} s ({full_s / one:.1f}x; "
        f"step time differs by {diff:.1e})"
    )
    wall, plans, simulated, failed = _run(space, "local", args.workers)
    print(
        f"local x{args.workers}: {plans} valid plans ({simulated} simulated, "
        f"{plans - simulated - failed} sized only, {failed} failed) in {wall:.1f} s = "
        f"{plans / wall:.2f} plans/s; one after another with every micro-batch simulated "
        f"would take ~{simulated * full_s:.0f} s (ratio {simulated * full_s / wall:.1f}x)"
    )
    if args.ray:  # scaling: the same grid on 1 and 2 Ray workers (Ray's start included)
        w1, n1, *_ = _run(space, "ray", 1)
        w2, *_ = _run(space, "ray", 2)
        print(f"ray, {n1} plans: x1 {w1:.1f} s, x2 {w2:.1f} s, speed-up {w1 / w2:.2f}x")
    print(f"load average {os.getloadavg()[0]:.1f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
