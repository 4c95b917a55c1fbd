"""How fast `estimate()` is on big jobs: generate the distinct ranks, simulate, report.

Cases (the issue's targets on a 2-core machine):
  * GPT-3 175B on 1,024 H100s — NeMo's published plan: TP4, PP8 with 12 virtual stages,
    DP32, gbs 2048, TP-comm overlap (target < 10 s);
  * Llama 3.1 405B on 16,384 H100s — Meta's 8K-context plan: TP8, PP16 (2 virtual stages),
    DP128, gbs 2048 x 8192 tokens (target < 60 s).

Each case prints wall seconds split into generation and simulation, the node count, and
the ratio to a baseline measured in the same process just before it (a fixed numpy sort,
so a loaded machine shows as a bigger baseline, not a slower estimator).

    python scripts/bench_estimate.py [--only 175b|405b]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from lumos.simulator.workload import ParallelPlan, estimate

CASES = {
    "175b": (
        "gpt3-175b",
        ParallelPlan(tp=4, pp=8, vp=12, dp=32, mbs=1, gbs=2048, seq=2048, tp_comm_overlap=True),
        10.0,
    ),
    "405b": (
        "llama3.1-405b",
        ParallelPlan(tp=8, pp=16, vp=2, dp=128, mbs=1, gbs=2048, seq=8192),
        60.0,
    ),
}


def _baseline() -> float:
    rng = np.random.default_rng(0)
    data = rng.integers(0, 1 << 40, 4_000_000)
    t0 = time.perf_counter()
    np.sort(data)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=sorted(CASES), default=None)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for key, (model, plan, target) in CASES.items():
        if args.only and key != args.only:
            continue
        base = _baseline()
        t0 = time.perf_counter()
        r = estimate(model, plan, "h100")
        wall = time.perf_counter() - t0
        s = r.stats
        print(
            f"{model} on {plan.world} GPUs: {wall:.2f} s (target {target:.0f} s; generate "
            f"{s['generate_s']:.2f} s, simulate {s['simulate_s']:.2f} s; {s['nodes']:,} nodes "
            f"in {s['ranks_generated']} distinct ranks); {wall / base:.0f} x baseline "
            f"({base * 1e3:.0f} ms); step {r.iteration_time_s:.2f} s, MFU {100 * r.mfu:.1f} %"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
