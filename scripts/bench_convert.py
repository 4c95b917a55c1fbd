"""Benchmark: link + convert of a real trace replicated to a large size (1x, 2x, 4x).

Takes DLRM rank 0 (host ET schema 1.0.1 + its Kineto trace, from ../shared/fixtures),
repeats its iteration `copies` times one after another (ids, rf_ids, correlations and
timestamps shifted) inside one ProfilerStep, writes the pair to a temp folder, then
converts it in a fresh subprocess and reports wall time, peak RSS and nodes/s.

    python scripts/bench_convert.py            # base copies 120 (~200k host nodes), 1x 2x 4x
    python scripts/bench_convert.py --copies 10 --scales 1
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

FIX = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "fixtures"
    / "param"
    / "et_replay"
    / "tests"
    / "inputs"
)


def _member(tar_path: Path, prefix: str) -> dict:
    with tarfile.open(tar_path) as tar:
        for m in tar.getmembers():
            if Path(m.name).name.startswith(prefix) and m.isfile():
                return json.load(tar.extractfile(m))  # type: ignore[arg-type]
    raise SystemExit(f"{prefix} not in {tar_path}")


def make_inputs(copies: int, out: Path) -> tuple[int, int]:
    host = _member(FIX / "dlrm_pytorch_et.tar.gz", "dlrm_eg_0")
    kin = _member(FIX / "dlrm_kineto.tar.gz", "worker0_")
    nodes = [n for n in host["nodes"] if n["parent"] != 0 or n["id"] == 1]
    id_span = max(n["id"] for n in host["nodes"]) + 1
    rf_span = max(n["rf_id"] for n in host["nodes"]) + 1
    step = next(e for e in kin["traceEvents"] if e.get("name", "").startswith("ProfilerStep"))
    t_span = step["dur"] + 10
    events = [e for e in kin["traceEvents"] if e.get("ph") == "X" and e is not step]
    corr_span = max(e.get("args", {}).get("correlation", 0) for e in events) + 1
    big_nodes = list(host["nodes"])
    roots = {n["id"] for n in host["nodes"] if n["name"].startswith("[pytorch")}
    for c in range(1, copies):
        for n in nodes:
            if n["id"] in roots:
                continue
            m = dict(n)
            m["id"] += c * id_span
            m["rf_id"] += c * rf_span
            if m["parent"] not in roots:
                m["parent"] += c * id_span
            big_nodes.append(m)
    big_events = [dict(step, dur=t_span * copies)]
    for c in range(copies):
        for e in events:
            m = dict(e)
            m["ts"] = e["ts"] + c * t_span
            if "args" in e:
                args = dict(e["args"])
                for key in ("correlation", "External id"):
                    if key in args:
                        args[key] += c * corr_span
                m["args"] = args
            big_events.append(m)
    (out / "host_rank0.json").write_text(json.dumps(dict(host, nodes=big_nodes)))
    (out / "kineto_rank0.json").write_text(json.dumps(dict(kin, traceEvents=big_events)))
    return len(big_nodes), len(big_events)


CHILD = """
import json, resource, sys, time
from lumos.converters.convert import convert
t = time.perf_counter()
r = convert([sys.argv[1]], sys.argv[2], prefix="bench")
s = r.ranks[0]
print(json.dumps({"wall_s": time.perf_counter() - t, "nodes": s.nodes,
      "linked": s.link.linked, "host_ops": s.link.host_ops,
      "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=120)
    ap.add_argument("--scales", type=int, nargs="+", default=[1, 2, 4])
    args = ap.parse_args()
    print(
        f"{'scale':>5} {'host nodes':>11} {'kineto ev':>10} {'out nodes':>10} {'link %':>7} "
        f"{'wall s':>7} {'peak MB':>8} {'nodes/s':>9}"
    )
    for scale in args.scales:
        with tempfile.TemporaryDirectory() as tmp:
            inp = Path(tmp) / "in"
            inp.mkdir()
            n_host, n_ev = make_inputs(args.copies * scale, inp)
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, str(inp), str(Path(tmp) / "out")],
                capture_output=True,
                text=True,
                check=True,
            )
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            print(
                f"{scale:>5} {n_host:>11} {n_ev:>10} {r['nodes']:>10} "
                f"{100 * r['linked'] / r['host_ops']:>7.2f} {r['wall_s']:>7.2f} "
                f"{r['maxrss_mb']:>8.0f} {r['nodes'] / r['wall_s']:>9.0f}"
            )


if __name__ == "__main__":
    main()
