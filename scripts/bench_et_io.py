"""Benchmark: reading and writing large Chakra ETs (nodes/s, peak memory, streaming).

Generates synthetic ETs of N nodes shaped like converted GPU traces (names, deps, a
handful of attributes), then, each in a fresh subprocess so peak RSS is its own:
  write   EtWriter, N nodes
  read    EtReader, parse every node (streaming: nothing kept)
  mlc     mlc-chakra's protolib reader on the same file (baseline, if installed)
Memory must stay flat as N grows (the reader streams); time must grow linearly.

Usage: python scripts/bench_et_io.py [--sizes 250000,500000,1000000]
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


def make_node(pb, i: int):
    node = pb.Node(
        id=i + 1, name=f"aten::linear_{i % 97}", type=pb.COMP_NODE if i % 10 else pb.COMM_COLL_NODE
    )
    node.duration_micros = 5 + i % 50
    node.start_time_micros = i * 7
    if i:
        node.ctrl_deps.append(i)
    if i > 3:
        node.data_deps.append(i - 3)
    node.attr.add(name="is_cpu_op", bool_val=False)
    node.attr.add(name="stream", int64_val=7 + i % 3)
    node.attr.add(name="dur_ns", int64_val=5123 + i % 50)
    if node.type == pb.COMM_COLL_NODE:
        node.attr.add(name="comm_type", int64_val=0)
        node.attr.add(name="comm_size", int64_val=1 << 20)
    return node


def child(task: str, path: str, n: int) -> dict:
    from lumos.proto import pb

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    count = 0
    if task == "write":
        from lumos.converters.chakra.stream import EtWriter

        with EtWriter(path) as w:
            for i in range(n):
                w.write(make_node(pb, i))
        count = n
    elif task == "read":
        from lumos.converters.chakra.stream import EtReader

        with EtReader(path) as r:
            for _ in r:
                count += 1
    elif task == "mlc":
        from chakra.src.third_party.utils.protolib import decodeMessage, openFileRd

        f = openFileRd(path)
        meta = pb.GlobalMetadata()
        decodeMessage(f, meta)
        node = pb.Node()
        while decodeMessage(f, node):
            count += 1
            node = pb.Node()
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "task": task,
        "nodes": count,
        "seconds": dt,
        "peak_rss_mb": peak / 1024,
        "extra_rss_mb": (peak - base) / 1024,
    }


def run_child(task: str, path: Path, n: int) -> dict | None:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", task, str(path), str(n)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        if task == "mlc":
            return None
        raise SystemExit(proc.stderr)
    return json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="250000,500000,1000000")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        task, path, n = args.child
        print(json.dumps(child(task, path, int(n))))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"{'nodes':>9} {'task':>6} {'seconds':>8} {'nodes/s':>10} {'peak MB':>8} {'+MB':>6} {'file MB':>8}  vs mlc-chakra"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"bench.{n}.et"
            rows = {t: run_child(t, path, n) for t in ("write", "read", "mlc")}
            size_mb = path.stat().st_size / 2**20
            for task, r in rows.items():
                if r is None:
                    print(f"{n:>9,} {task:>6}  (mlc-chakra not installed)")
                    continue
                ratio = ""
                if task == "read" and rows["mlc"]:
                    ratio = (
                        f"speed {rows['mlc']['seconds'] / r['seconds']:.2f}x mlc-chakra's reader"
                    )
                print(
                    f"{n:>9,} {task:>6} {r['seconds']:>8.2f} {r['nodes'] / r['seconds']:>10,.0f} {r['peak_rss_mb']:>8.0f} {r['extra_rss_mb']:>6.0f} {size_mb:>8.1f}  {ratio}"
                )
            path.unlink()


if __name__ == "__main__":
    main()
