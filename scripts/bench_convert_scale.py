"""Benchmark: does `lumos convert` grow linearly with the trace? Old code against new.

Builds the largest Kineto fixture (HolisticTraceAnalysis rank 0 of 16, A100, 25.8 MB,
14 CUDA graph launches a step) replicated N times back to back as one ProfilerStep
(`make_big_trace.py`), converts each size in a fresh process, and prints CPU seconds,
peak RSS (the child's `VmHWM`) and the growth against the smallest size: for a linear
converter `x CPU` tracks `x size`. With `--code DIR` (another source tree holding
`lumos/`, built like `scripts/typecheck.sh`'s symlink tree from `git archive`) every
size is also converted by that code, alternating, and `old/new` is printed.

    python scripts/bench_convert_scale.py                       # copies 1 3 10
    python scripts/bench_convert_scale.py --copies 10 30 --code /tmp/old
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_convert import write_array_doc
from make_big_trace import HTA, kineto_copies, load_kineto_gz

CHILD = """
import json, os, resource, sys
code = os.environ.get("BENCH_CODE")
if code:  # run another source tree instead of the installed (editable) one
    sys.meta_path = [f for f in sys.meta_path if "editable" not in type(f).__module__]
    sys.path.insert(0, code)
from lumos.converters.pytorch.convert import convert
before = resource.getrusage(resource.RUSAGE_SELF)
r = convert([sys.argv[1]], sys.argv[2], prefix="bench")
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"cpu_s": cpu, "nodes": r.ranks[0].nodes, "peak_mb": hwm / 1024}))
"""


def run(inp: Path, out: Path, code: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("BENCH_CODE", None)
    if code:
        env["BENCH_CODE"] = code
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(inp), str(out)], capture_output=True, text=True, env=env
    )
    if proc.returncode:
        raise SystemExit(proc.stderr)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--copies", type=int, nargs="+", default=[1, 3, 10])
    ap.add_argument("--code", default=None, help="old source tree to compare with")
    ap.add_argument("--repeat", type=int, default=1, help="runs per size and code (min kept)")
    args = ap.parse_args()
    doc = load_kineto_gz(HTA)
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    sides = [("new", None)] + ([("old", args.code)] if args.code else [])
    print(
        f"{'copies':>6} {'JSON MB':>8} {'nodes':>9} {'code':>4} {'CPU s':>7} {'µs/node':>8} "
        f"{'peak MB':>8} {'x size':>7} {'x CPU':>7} {'old/new':>8}",
        flush=True,
    )
    first: dict[str, dict[str, Any]] = {}
    base_copies = args.copies[0]
    for copies in args.copies:
        with tempfile.TemporaryDirectory() as tmp:
            inp = Path(tmp) / "in"
            inp.mkdir()
            items = kineto_copies(doc, copies, one_step=True)
            write_array_doc(inp / "kineto_rank0.json", head, "traceEvents", items, gz=False)
            size = (inp / "kineto_rank0.json").stat().st_size / 1e6
            best: dict[str, dict[str, Any]] = {}
            for i in range(args.repeat):
                for name, code in sides:
                    r = run(inp, Path(tmp) / f"{name}{i}", code)
                    if name not in best or r["cpu_s"] < best[name]["cpu_s"]:
                        best[name] = r
            for name, _ in sides:
                r = best[name]
                base = first.setdefault(name, r)
                ratio = best["old"]["cpu_s"] / best["new"]["cpu_s"] if args.code else None
                print(
                    f"{copies:>6} {size:>8.0f} {r['nodes']:>9} {name:>4} {r['cpu_s']:>7.2f} "
                    f"{1e6 * r['cpu_s'] / r['nodes']:>8.2f} {r['peak_mb']:>8.0f} "
                    f"{copies / base_copies:>7.1f} {r['cpu_s'] / base['cpu_s']:>7.2f} "
                    f"{'' if ratio is None or name == 'new' else f'{ratio:.2f}':>8}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
