"""Benchmark of the native simulator: throughput and a 512-rank GPT-3-like step.

1. Throughput, end to end (`simulate()`: validation, planning, the event loop, result
   assembly), min and median of several runs, for an unfolded 16-rank synthetic step
   (TP 2 × PP 8, every node simulated) and the 64-rank resnet_dp fixture — from graphs
   in memory, and from the tar of ETs (load included). Other sessions share this machine,
   so each figure comes with a baseline measured in the same process: the pure-Python
   cost of one heap push + pop per node (the least an event loop can do), and for ETs
   the time to just read (parse) every node with EtReader. The ratios move far less with
   machine load than the raw times do.
2. Scale: a 512-rank GPT-3-like step (TP 8 × PP 8 × DP 8, 12 layers per stage,
   24 micro-batches: over 7M nodes) generated as per-rank graphs in memory, simulated
   with symmetry folding of identical ranks; prints wall time (target < 60 s).

3. Real ranks at scale (`bench_scale.py`, each case in a fresh process, inputs cached):
   `--load`: the 1.26M-node 4x DLRM rank, `load_graphs` against the streaming `et info`
   read of the same file (nodes/s, peak RSS per node); `--dlrm8`: `lumos simulate` of the
   8 converted DLRM ranks end to end against `lumos --version`; `--scaling N ...`: jobs
   of N jittered copies of a real DLRM rank (`make_job.py`), wall time and peak RSS.

Run: python scripts/bench_simulate.py [--repeat N]
     python scripts/bench_simulate.py --only-scale --load --dlrm8 --scaling 1 8 32 128 --copies 10
     python scripts/bench_simulate.py --only-scale --scaling 128 --copies 100 --no-timelines
       (the 51.8M-node, 128-rank job: `docs/speed.md`)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from heapq import heappop, heappush
from pathlib import Path

import bench_scale

from lumos.converters.chakra.files import find_et_sources
from lumos.simulator.load import load_graphs
from lumos.simulator.run import SimOptions, simulate
from lumos.simulator.workload.synthetic import StepShape, synthetic_step

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
RESNET = FIXTURES / "astra-sim/inputs/workload/ASTRA-sim-2.0/resnet_dp.tar"


def _timed(
    fn: Callable[[], object], baseline: Callable[[], float], repeat: int
) -> tuple[list[float], list[float], object]:
    """Sorted walls of `fn`, and each run's wall over the `baseline` seconds measured just
    before it (adjacent measurements see the same machine load), and the last result."""
    walls, ratios, out = [], [], None
    for _ in range(repeat):
        base = baseline()
        t0 = time.perf_counter()
        out = fn()
        walls.append(time.perf_counter() - t0)
        ratios.append(walls[-1] / base)
    return sorted(walls), sorted(ratios), out


def _heap_baseline(n: int) -> float:
    """Seconds for n heap pushes and pops of int keys: one bare event per node."""
    heap: list[int] = []
    keys = [(i * 2654435761) % (1 << 40) for i in range(n)]
    t0 = time.perf_counter()
    for k in keys:
        heappush(heap, k)
        if len(heap) > 64:
            heappop(heap)
    while heap:
        heappop(heap)
    return time.perf_counter() - t0


def _read_ets(target: Path) -> float:
    """Seconds to read (parse) every node of every rank with EtReader."""
    t0 = time.perf_counter()
    for source in find_et_sources(target):
        with source.open() as reader:
            for _ in reader:
                pass
    return time.perf_counter() - t0


def _line(label: str, n: int, walls: list[float], ratios: list[float], base_name: str) -> str:
    lo, med = walls[0], statistics.median(walls)
    return (
        f"{label}: {n:,} nodes, end to end min {lo:.3f} s ({n / lo:,.0f} nodes/s), "
        f"median {med:.3f} s ({n / med:,.0f} nodes/s); "
        f"{statistics.median(ratios):.2f}x {base_name} (median of {len(ratios)})"
    )


def _throughput(label: str, graphs: list, repeat: int) -> None:
    n = sum(len(g) for g in graphs)
    walls, ratios, result = _timed(lambda: simulate(graphs), lambda: _heap_baseline(n), repeat)
    s = result.stats  # type: ignore[attr-defined]
    print(_line(label, n, walls, ratios, "one heap push + pop per node"))
    print(
        f"  last run: plan {s['plan_s']:.3f} s, loop {s['run_s']:.3f} s "
        f"({n / s['run_s']:,.0f} nodes/s)"
    )


def _from_files(label: str, target: Path, repeat: int) -> None:
    walls, ratios, result = _timed(lambda: simulate(target), lambda: _read_ets(target), repeat)
    n = result.stats["nodes_simulated"]  # type: ignore[attr-defined]
    print(_line(label, n, walls, ratios, "reading the ETs with EtReader"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per throughput case")
    parser.add_argument("--no-scale", action="store_true", help="skip the 512-rank step")
    parser.add_argument("--only-scale", action="store_true", help="only the cases of 3.")
    parser.add_argument("--load", action="store_true", help="load the 4x DLRM rank")
    parser.add_argument("--dlrm8", action="store_true", help="8-rank DLRM end to end")
    parser.add_argument("--scaling", type=int, nargs="*", help="job sizes in ranks")
    parser.add_argument("--copies", type=int, default=100, help="base rank: iteration copies")
    parser.add_argument("--keep", action="store_true", help="keep the generated jobs")
    parser.add_argument(
        "--no-timelines", action="store_true", help="scaling runs keep steps and breakdowns only"
    )
    args = parser.parse_args()
    if args.load:
        bench_scale.load_case(args.repeat)
    if args.dlrm8:
        bench_scale.dlrm8_case(args.repeat)
    if args.scaling:
        bench_scale.scaling_case(args.scaling, args.copies, args.keep, not args.no_timelines)
    if args.only_scale:
        return
    shape = StepShape(tp=2, pp=8, dp=1, layers_per_stage=12, microbatches=24)
    _throughput("unfolded 16-rank TP2xPP8 step", synthetic_step(shape), args.repeat)
    if RESNET.exists():
        _throughput("resnet_dp.tar, 64 ranks, graphs in memory", load_graphs(RESNET), args.repeat)
        _from_files("resnet_dp.tar, 64 ranks, from the tar", RESNET, args.repeat)
    if args.no_scale:
        return
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
