"""Benchmark: load + link + build + write of a real trace replicated to a large size.

Takes DLRM rank 0 (host ET schema 1.0.1 + its Kineto trace, from ../shared/fixtures) and
repeats its iteration `copies` times one after another inside one ProfilerStep: host
nodes get new ids / rf_ids, Kineto events (all of them: ops, runtime calls, kernels, flow
and instant events) new timestamps, correlations and external ids. Each scale's pair is
written to a temp folder, then converted in a fresh subprocess that reports wall time.
Memory: `peak MB` is the highest total PSS of that process and its workers, sampled
every 20 ms (shared pages counted once); `rss MB` the sum of the process's and its
largest worker's peak RSS (an upper bound that counts pages shared after a fork twice). As a yardstick another subprocess times plain
`orjson.loads` of both whole files (the JSON parse alone, GC off), printed as `parse s`
and as the ratio `x parse` = convert / parse.

    python scripts/bench_convert.py                   # base 78 copies; 1x 2x 4x
    python scripts/bench_convert.py --copies 10 --scales 1
    python scripts/bench_convert.py --code /tmp/old   # time another source tree
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

FIX = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "fixtures"
    / "param"
    / "et_replay"
    / "tests"
    / "inputs"
)


def _member(tar_path: Path, prefix: str) -> dict[str, Any]:
    with tarfile.open(tar_path) as tar:
        for m in tar.getmembers():
            if Path(m.name).name.startswith(prefix) and m.isfile():
                return json.load(tar.extractfile(m))  # type: ignore[arg-type]
    raise SystemExit(f"{prefix} not in {tar_path}")


def write_array_doc(
    path: Path, head: dict[str, Any], key: str, items: Any, gz: bool = False
) -> int:
    """Write {head..., key: [items]} streaming (gzip when asked); returns the item count."""
    count = 0
    with gzip.open(path, "wb") if gz else open(path, "wb") as out:
        out.write(orjson.dumps(head)[:-1] + b', "' + key.encode() + b'": [\n')
        for item in items:
            out.write((b",\n" if count else b"") + orjson.dumps(item))
            count += 1
        out.write(b"\n]}\n")
    return count


def host_copies(host: dict[str, Any], copies: int) -> Any:
    """The host ET's nodes with its iteration repeated: new ids and rf_ids per copy."""
    roots = {n["id"] for n in host["nodes"] if n["name"].startswith("[pytorch")}
    id_span = max(n["id"] for n in host["nodes"]) + 1
    rf_span = max(n["rf_id"] for n in host["nodes"]) + 1
    yield from host["nodes"]
    body = [n for n in host["nodes"] if n["id"] not in roots]
    for c in range(1, copies):
        for n in body:
            m = dict(n, id=n["id"] + c * id_span, rf_id=n["rf_id"] + c * rf_span)
            if m["parent"] not in roots:
                m["parent"] += c * id_span
            yield m


def make_inputs(copies: int, out: Path) -> tuple[int, int, int]:
    """Write host_rank0.json and kineto_rank0.json; returns (host nodes, events, X events)."""
    host = _member(FIX / "dlrm_pytorch_et.tar.gz", "dlrm_eg_0")
    kin = _member(FIX / "dlrm_kineto.tar.gz", "worker0_")

    events = kin["traceEvents"]
    step = next(e for e in events if e.get("name", "").startswith("ProfilerStep"))
    t_span = step["dur"] + 10
    corr_span = max(e.get("args", {}).get("correlation", 0) for e in events) + 1
    ext_span = max(e.get("args", {}).get("External id", 0) for e in events) + 1
    flow_span = max(e.get("id", 0) for e in events if e.get("ph") in ("s", "f")) + 1
    once = [e for e in events if e.get("ph") in ("M", "i") or e.get("cat") == "Trace"]
    body = [e for e in events if e is not step and not any(e is o for o in once)]

    def kineto_events() -> Any:  # metadata last, as Kineto writes it
        yield dict(step, dur=t_span * copies)
        for c in range(copies):
            for e in body:
                m = dict(e, ts=e["ts"] + c * t_span)
                if e.get("ph") in ("s", "f"):
                    m["id"] = e["id"] + c * flow_span
                if "args" in e:
                    args = dict(e["args"])
                    if "correlation" in args:
                        args["correlation"] += c * corr_span
                    if "External id" in args:
                        args["External id"] += c * ext_span
                    m["args"] = args
                yield m
        yield from once

    head = {k: v for k, v in host.items() if k != "nodes"}
    n_host = write_array_doc(out / "host_rank0.json", head, "nodes", host_copies(host, copies))
    khead = {k: v for k, v in kin.items() if k != "traceEvents"}
    n_ev = write_array_doc(out / "kineto_rank0.json", khead, "traceEvents", kineto_events())
    n_x = 1 + sum(e.get("ph") == "X" for e in once) + copies * sum(e.get("ph") == "X" for e in body)
    return n_host, n_ev, n_x


PARSE = """
import gc, sys, time
import orjson
gc.disable()
t = time.perf_counter()
for name in ("host_rank0.json", "kineto_rank0.json"):
    with open(sys.argv[1] + "/" + name, "rb") as f:
        orjson.loads(f.read())
print(time.perf_counter() - t)
"""

CHILD = """
import json, os, resource, sys, time
code = os.environ.get("BENCH_CODE")
if code:  # run another source tree instead of the installed (editable) one
    sys.meta_path = [f for f in sys.meta_path if "editable" not in type(f).__module__]
    sys.path.insert(0, code)
from lumos.converters.pytorch.convert import convert
t = time.perf_counter()
r = convert([sys.argv[1]], sys.argv[2], prefix="bench")
wall = time.perf_counter() - t
s = r.ranks[0]
me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"wall_s": wall, "nodes": s.nodes, "linked": s.link.linked,
      "host_ops": s.link.host_ops, "maxrss_mb": (me + kids) / 1024}))
"""


def _tree_pss_mb(pid: int) -> float:
    """Proportional set size of a process and its descendants (shared pages split fairly)."""
    total = 0.0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) / 1024
                    break
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return total


def run_child(inp: Path, out: Path, code: str | None) -> dict[str, Any]:
    """Convert in a fresh process; samples the process tree's PSS every 20 ms meanwhile."""
    env = dict(os.environ)
    if code:
        env["BENCH_CODE"] = code
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(inp), str(out)], stdout=log, stderr=log, env=env
        )
        peak = 0.0
        while proc.poll() is None:
            peak = max(peak, _tree_pss_mb(proc.pid))
            time.sleep(0.02)
        log.seek(0)
        text = log.read()
    if proc.returncode:
        raise SystemExit(text)
    result = dict(json.loads(text.strip().splitlines()[-1]))
    result["pss_mb"] = peak
    return result


def parse_time(inp: Path) -> float:
    proc = subprocess.run(
        [sys.executable, "-c", PARSE, str(inp)], capture_output=True, text=True, check=True
    )
    return float(proc.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--copies",
        type=int,
        default=78,
        help="copies of the iteration at 1x (4x: >= 1M Kineto events)",
    )
    ap.add_argument("--scales", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--repeat", type=int, default=1, help="runs per scale (best wall kept)")
    ap.add_argument(
        "--code", default=None, help="another source tree (a folder holding lumos/) to time"
    )
    args = ap.parse_args()
    print(
        f"{'scale':>5} {'host nodes':>10} {'kineto ev':>10} {'(X ev)':>9} {'JSON MB':>8} "
        f"{'out nodes':>10} {'link %':>7} {'parse s':>8} {'wall s':>7} {'x parse':>8} "
        f"{'peak MB':>8} {'rss MB':>7} {'nodes/s':>9}",
        flush=True,
    )
    for scale in args.scales:
        with tempfile.TemporaryDirectory() as tmp:
            inp = Path(tmp) / "in"
            inp.mkdir()
            n_host, n_ev, n_x = make_inputs(args.copies * scale, inp)
            size = sum(p.stat().st_size for p in inp.iterdir()) / 1e6
            runs = [run_child(inp, Path(tmp) / f"out{i}", args.code) for i in range(args.repeat)]
            r = min(runs, key=lambda x: x["wall_s"])
            r["parse_s"] = min(parse_time(inp) for _ in range(args.repeat))
            print(
                f"{scale:>5} {n_host:>10} {n_ev:>10} {n_x:>9} {size:>8.0f} {r['nodes']:>10} "
                f"{100 * r['linked'] / r['host_ops']:>7.2f} {r['parse_s']:>8.2f} "
                f"{r['wall_s']:>7.2f} {r['wall_s'] / r['parse_s']:>8.2f} "
                f"{max(x['pss_mb'] for x in runs):>8.0f} {max(x['maxrss_mb'] for x in runs):>7.0f} "
                f"{r['nodes'] / r['wall_s']:>9.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
