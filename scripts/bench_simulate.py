"""Benchmark of the native simulator: throughput and a 512-rank GPT-3-like step.

1. Throughput: an unfolded 16-rank synthetic step (TP 2 × PP 8), every node simulated;
   prints simulated nodes per second for the event loop alone and end to end
   (planning + loop + result assembly), and the same for the 64-rank resnet_dp fixture.
2. Scale: a 512-rank GPT-3-like step (TP 8 × PP 8 × DP 8, 12 layers per stage,
   24 micro-batches: over 7M nodes) generated as per-rank graphs in memory, simulated
   with symmetry folding of identical ranks; prints wall time (target < 60 s).

Run: python scripts/bench_simulate.py
"""

from __future__ import annotations

import time
from pathlib import Path

from lumos.simulator.run import SimOptions, simulate
from lumos.simulator.synthetic import StepShape, synthetic_step

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"


def _throughput(label: str, graphs: list, repeat: int = 3) -> None:
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = simulate(graphs)
        wall = time.perf_counter() - t0
        if best is None or wall < best[0]:
            best = (wall, result)
    assert best is not None
    wall, result = best
    n = result.stats["nodes_simulated"]
    print(
        f"{label}: {n:,} nodes, loop {result.stats['run_s']:.3f} s "
        f"({n / result.stats['run_s']:,.0f} nodes/s), end to end {wall:.3f} s "
        f"({n / wall:,.0f} nodes/s), step {result.iteration_time_ns / 1e6:.3f} ms"
    )


def main() -> None:
    shape = StepShape(tp=2, pp=8, dp=1, layers_per_stage=12, microbatches=24)
    _throughput("unfolded 16-rank TP2xPP8 step", synthetic_step(shape))
    resnet = FIXTURES / "astra-sim/inputs/workload/ASTRA-sim-2.0/resnet_dp.tar"
    if resnet.exists():
        from lumos.simulator.load import load_graphs

        _throughput("resnet_dp.tar, 64 ranks", load_graphs(resnet))

    big = StepShape(tp=8, pp=8, dp=8, layers_per_stage=12, microbatches=24)
    t0 = time.perf_counter()
    graphs = synthetic_step(big)
    t_gen = time.perf_counter() - t0
    total = sum(len(g) for g in graphs)
    t0 = time.perf_counter()
    result = simulate(graphs, SimOptions(fold=True))
    wall = time.perf_counter() - t0
    s = result.stats
    print(
        f"512-rank GPT-3-like step (TP8 x PP8 x DP8): {total:,} nodes "
        f"(generated in {t_gen:.1f} s); folded to {s['ranks_simulated']} ranks / "
        f"{s['nodes_simulated']:,} nodes; simulated in {wall:.2f} s "
        f"(fold+plan {s['plan_s']:.2f} s, loop {s['run_s']:.2f} s); "
        f"step {result.iteration_time_ns / 1e6:.3f} ms; "
        f"effective {total / wall:,.0f} nodes/s; target < 60 s: "
        f"{'PASS' if wall < 60 else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
