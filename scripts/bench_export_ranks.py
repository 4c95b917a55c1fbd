"""Benchmark: `lumos export astra-sim` memory grows with the largest rank, not the job.

Writes jobs of R and 4R ranks (default 8 and 32) whose every rank is the same program: a
host op launching each kernel (a node the export drops), the kernels in one chain on one
stream, and every 50th kernel followed by an all-reduce of all ranks. Exports each job in
a fresh subprocess (so the peak RSS is its own) and prints CPU seconds, peak RSS and the
4R / R ratios. CPU time grows with the job (x4). Peak memory is one rank's mapping plus
the pre-flight's cross-rank graph (dependency lists, comm nodes, id / name / type of the
rest, and the hang check's working set: ~0.5 KB an exported node, still linear in the
job); this synthetic rank exports a delay node per kernel, so that graph is as large as
the source: 8 / 32 ranks of 10k nodes 88 / 218 MB (x2.5), of 40k nodes 224 / 737 MB
(x3.3). Every rank was held until the pre-flight ended before 2026-12 (a DLRM-derived
`make_job` 32-rank job: 2,393 -> 187 MB; docs/speed.md).

Usage: python scripts/bench_export_ranks.py [--ranks 8] [--nodes 5000]
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


def write_job(folder: Path, ranks: int, kernels: int) -> Path:
    """`j.<r>.et` for r < `ranks`, each 2 x `kernels` nodes plus its all-reduces."""
    from lumos.converters.chakra.attrs import make_attr
    from lumos.converters.chakra.stream import EtWriter, with_node_count
    from lumos.proto import pb

    folder.mkdir(parents=True, exist_ok=True)
    collectives = kernels // 50
    for rank in range(ranks):
        meta = pb.GlobalMetadata(version="0.0.4")
        meta.attr.extend([make_attr("rank", rank), make_attr("world_size", ranks)])
        count = 2 * kernels + collectives
        with EtWriter(folder / f"j.{rank}.et", with_node_count(meta, count)) as out:
            last, nid = None, 0
            for k in range(kernels):
                host = pb.Node(id=nid, name=f"aten::op{k}", type=pb.COMP_NODE)
                host.attr.extend([make_attr("is_cpu_op", True), make_attr("dur_ns", 2000)])
                gpu = pb.Node(id=nid + 1, name=f"kernel{k}", type=pb.COMP_NODE)
                gpu.duration_micros = 5
                gpu.attr.extend(
                    [
                        make_attr("is_cpu_op", False),
                        make_attr("dur_ns", 5000),
                        make_attr("stream", 7),
                    ]
                )
                gpu.data_deps.append(nid)
                if last is not None:
                    host.data_deps.append(last)
                out.write(host)
                out.write(gpu)
                last, nid = nid + 1, nid + 2
                if k % 50 == 49:
                    coll = pb.Node(id=nid, name="nccl:all_reduce", type=pb.COMM_COLL_NODE)
                    coll.attr.extend(
                        [
                            make_attr("is_cpu_op", False),
                            make_attr("comm_type", int(pb.ALL_REDUCE)),
                            make_attr("comm_size", 1 << 20),
                            make_attr("dur_ns", 20000),
                            make_attr("stream", 9),
                        ]
                    )
                    coll.data_deps.append(last)
                    out.write(coll)
                    last, nid = nid, nid + 1
    return folder / "j"


def child(prefix: str, out: str) -> dict[str, float]:
    from lumos.api import export_astra_sim

    c0 = time.process_time()
    export_astra_sim(prefix, out, hw="h100", force=True)
    return {
        "s": time.process_time() - c0,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_child(prefix: Path, out: Path) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", str(prefix), str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=8, help="R: jobs of R and 4R ranks")
    ap.add_argument("--nodes", type=int, default=5000, help="kernels a rank (x2 nodes)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    print(f"{'ranks':>6} {'nodes':>9} {'export s':>9} {'peak MB':>8}")
    results = []
    with tempfile.TemporaryDirectory(prefix="lumos-bench-ranks-") as tmp:
        for ranks in (args.ranks, 4 * args.ranks):
            prefix = write_job(Path(tmp) / f"r{ranks}", ranks, args.nodes)
            got = run_child(prefix, Path(tmp) / f"bundle{ranks}")
            nodes = ranks * (2 * args.nodes + args.nodes // 50)
            print(f"{ranks:6d} {nodes:9d} {got['s']:9.2f} {got['rss_mb']:8.0f}")
            results.append(got)
    small, big = results
    print(
        f"4R / R: CPU x{big['s'] / small['s']:.2f}, peak RSS x{big['rss_mb'] / small['rss_mb']:.2f}"
        " (x4 would be memory linear in the whole job)"
    )


if __name__ == "__main__":
    main()
