"""Benchmark: `lumos export astra-sim` on wide graphs scales linearly, like `simulate`.

Writes a 2-rank job whose ranks are one wide graph: a launch kernel, N kernels that all
depend on it (fan-out) and, for the `join` shape, one kernel that depends on all N (the
fan-in that used to be quadratic: each dependency was de-duplicated against a list).
Exports it and simulates it, each in a fresh subprocess so peak memory is its own, and
prints CPU seconds (steady on a busy machine; wall is close on an idle one), peak RSS,
export/simulate and the growth from the smallest N to each larger one: linear work grows
by N's ratio (10k -> 100k: ~10x), quadratic by its square.

Usage: python scripts/bench_export_wide.py [--sizes 10000,100000] [--shapes fanout,join]
Peak memory at 100k: about 1 GB for the export, 0.2 GB for the simulation.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_job(folder: Path, n: int, shape: str) -> Path:
    """`w.0.et`, `w.1.et`: the same wide graph on both ranks; returns the prefix."""
    from lumos.converters.chakra.attrs import make_attr
    from lumos.converters.chakra.stream import EtWriter, with_node_count
    from lumos.proto import pb

    def kernel(node_id: int, name: str) -> pb.Node:
        node = pb.Node(id=node_id, name=name, type=pb.COMP_NODE, duration_micros=1)
        node.attr.extend([make_attr("is_cpu_op", False), make_attr("dur_ns", 1000)])
        return node

    count = n + 1 + (shape == "join")
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(2):
        meta = pb.GlobalMetadata(version="0.0.4")
        meta.attr.extend([make_attr("rank", rank), make_attr("world_size", 2)])
        with EtWriter(folder / f"w.{rank}.et", with_node_count(meta, count)) as out:
            out.write(kernel(0, "launch"))
            for i in range(1, n + 1):
                node = kernel(i, f"k{i}")
                node.data_deps.append(0)
                out.write(node)
            if shape == "join":
                sink = kernel(n + 1, "join")
                sink.data_deps.extend(range(1, n + 1))
                out.write(sink)
    return folder / "w"


def child(task: str, prefix: str, out: str) -> dict[str, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    if task == "export":
        from lumos.api import export_astra_sim

        export_astra_sim(prefix, out, hw="h100", force=True)
    else:
        from lumos.api import simulate

        simulate(prefix)
    return {
        "s": time.process_time() - c0,
        "wall": time.perf_counter() - t0,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_child(task: str, prefix: Path, out: Path) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", task, str(prefix), str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--shapes", default="fanout,join")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"{'shape':7} {'N':>8} {'export s':>9} {'MB':>6} {'sim s':>7} {'MB':>6} "
        f"{'exp/sim':>8} {'N x':>6} {'export x':>9} {'sim x':>7}"
    )
    with tempfile.TemporaryDirectory(prefix="lumos-bench-wide-") as tmp:
        for shape in args.shapes.split(","):
            first: tuple[int, float, float] | None = None
            for n in sizes:
                prefix = write_job(Path(tmp) / f"{shape}{n}", n, shape)
                exp = run_child("export", prefix, Path(tmp) / f"bundle-{shape}{n}")
                sim = run_child("simulate", prefix, "")
                first = first or (n, exp["s"], sim["s"])
                print(
                    f"{shape:7} {n:8d} {exp['s']:9.2f} {exp['rss_mb']:6.0f} {sim['s']:7.2f} "
                    f"{sim['rss_mb']:6.0f} {exp['s'] / sim['s']:8.2f} {n / first[0]:6.1f} "
                    f"{exp['s'] / first[1]:9.2f} {sim['s'] / first[2]:7.2f}"
                )


if __name__ == "__main__":
    main()
