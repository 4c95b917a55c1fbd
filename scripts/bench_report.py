"""Benchmark of the reports on a large synthetic step: breakdown, critical path, timeline.

Usage: python scripts/bench_report.py [--dp 16] [--timeline-ranks 32]
Prints seconds per stage and tasks per second; the simulation itself is timed by the
simulator's own benchmark.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from lumos.simulator.report.breakdown import breakdown
from lumos.simulator.report.critical_path import critical_path
from lumos.simulator.report.summary import build_report
from lumos.simulator.report.timeline import write_timeline
from lumos.simulator.run import SimOptions, simulate
from lumos.simulator.workload.synthetic import StepShape, synthetic_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dp", type=int, default=16)
    parser.add_argument("--timeline-ranks", type=int, default=32)
    args = parser.parse_args()
    shape = StepShape(
        tp=8, pp=4, dp=args.dp, layers_per_stage=12, microbatches=8, fwd_kernels=8, dp_buckets=8
    )
    result = simulate(synthetic_step(shape), SimOptions(fold=True))
    tasks = sum(len(r.tasks) for r in result.ranks)
    print(f"{len(result.ranks)} ranks, {tasks:,} tasks, step {result.iteration_time_ns:,} ns")

    def timed(label: str, n: int, work):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        out = work()
        dt = time.perf_counter() - t0
        print(f"{label:<28} {dt:7.3f} s   {n / dt:14,.0f} tasks/s")
        return out

    timed("breakdown (all ranks)", tasks, lambda: breakdown(result))
    path = timed("critical path", tasks, lambda: critical_path(result))
    print(f"  path: {len(path.steps):,} steps through {len(path.ranks)} rank(s)")
    timed("build_report", tasks, lambda: build_report(result))
    ranks = range(min(args.timeline_ranks, len(result.ranks)))
    n_events = sum(len(result.ranks[r].tasks) for r in ranks)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        timed(
            f"timeline ({len(ranks)} ranks)",
            n_events,
            lambda: write_timeline(result, out, ranks=ranks),
        )
        print(f"  {out.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
