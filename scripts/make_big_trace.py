"""Make big traces from real fixtures: N copies of a capture, one after another in time.

    python scripts/make_big_trace.py OUT --copies 100                  # HTA rank 0, Kineto only
    python scripts/make_big_trace.py OUT --copies 100 --dlrm --ranks 8 # DLRM host ET + Kineto
    python scripts/make_big_trace.py OUT --copies 100 --dlrm --host-only
    python scripts/make_big_trace.py OUT --copies 100 --gzip

Kineto (default: HolisticTraceAnalysis `negative_queue_length_values_check/rank0.json.gz`,
the largest fixture, 25.8 MB, 5 ProfilerSteps): every event is repeated `copies` times,
each copy's timestamps shifted by the capture's span, its correlations, External ids and
flow ids by their ranges, so kernels still link to their launches. The ProfilerSteps are
renumbered (`--steps keep`: 5N steps, the converter keeps one) or replaced by one step
spanning every copy (`--steps one`: the whole file is converted). Metadata events once.
With `--dlrm` the pair of DLRM rank r (param fixtures, host ET 1.0.1 + Kineto) is
replicated as `bench_convert.make_inputs` does (one step over all copies), for ranks
0..`--ranks`-1; `--host-only` writes the host ETs alone. Outputs are streamed, never held.
"""

from __future__ import annotations

import argparse
import gzip
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_convert import FIX, _member, write_array_doc

HTA = (
    Path(__file__).resolve().parents[2]
    / "shared/fixtures/HolisticTraceAnalysis/tests/data"
    / "negative_queue_length_values_check/rank0.json.gz"
)
STEP = "ProfilerStep#"


def _span(events: list[dict[str, Any]], key: str, where: Any = None) -> int:
    vals = [e.get("args", {}).get(key, 0) for e in events if where is None or where(e)]
    return max([v for v in vals if isinstance(v, int)] or [0]) + 1


def kineto_copies(doc: dict[str, Any], copies: int, one_step: bool) -> Iterator[dict[str, Any]]:
    """The events of `copies` back-to-back copies of a Kineto trace (metadata last)."""
    events = doc["traceEvents"]
    timed = [e for e in events if "ts" in e and e.get("ph") not in ("M",)]
    t0 = min(e["ts"] for e in timed)
    t_span = max(e["ts"] + e.get("dur", 0) for e in timed) - t0 + 10
    corr = _span(events, "correlation")
    ext = _span(events, "External id")
    flow = max([e.get("id", 0) for e in events if e.get("ph") in ("s", "f")] or [0]) + 1
    once = [e for e in events if e.get("ph") in ("M", "i") or e.get("cat") == "Trace"]
    steps = [e for e in events if str(e.get("name", "")).startswith(STEP)]
    skip = {id(e) for e in once} | ({id(e) for e in steps} if one_step else set())
    body = [e for e in events if id(e) not in skip]
    if one_step and steps:
        first = min(steps, key=lambda e: e["ts"])
        yield dict(first, name=f"{STEP}1", ts=t0, dur=t_span * copies)
    for c in range(copies):
        for e in body:
            m = dict(e, ts=e["ts"] + c * t_span) if "ts" in e else dict(e)
            if e.get("ph") in ("s", "f") and isinstance(e.get("id"), int):
                m["id"] = e["id"] + c * flow
            if str(e.get("name", "")).startswith(STEP):
                m["name"] = f"{STEP}{c * len(steps) + steps.index(e) + 1}"
            if "args" in e:
                args = dict(e["args"])
                if isinstance(args.get("correlation"), int):
                    args["correlation"] += c * corr
                if isinstance(args.get("External id"), int):
                    args["External id"] += c * ext
                m["args"] = args
            yield m
    yield from once


def load_kineto_gz(path: Path) -> dict[str, Any]:
    """A whole gzip'ed Kineto trace (the fixture, a few tens of MB)."""
    with gzip.open(path) as f:
        return dict(orjson.loads(f.read()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--copies", type=int, required=True)
    ap.add_argument("--kineto", type=Path, default=HTA, help="Kineto trace to replicate")
    ap.add_argument("--steps", choices=("one", "keep"), default="one")
    ap.add_argument("--dlrm", action="store_true", help="DLRM host ET + Kineto pairs instead")
    ap.add_argument("--ranks", type=int, default=1, help="DLRM ranks 0..N-1 (N <= 8)")
    ap.add_argument("--host-only", action="store_true", help="DLRM host ETs alone")
    ap.add_argument("--gzip", action="store_true", help="write .json.gz")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ext = ".json.gz" if args.gzip else ".json"
    if not args.dlrm:
        doc = load_kineto_gz(args.kineto)
        head = {k: v for k, v in doc.items() if k != "traceEvents"}
        items = kineto_copies(doc, args.copies, args.steps == "one")
        n = write_array_doc(args.out / f"kineto_rank0{ext}", head, "traceEvents", items, args.gzip)
        print(f"kineto: {n} events")
        return
    import bench_convert

    for r in range(args.ranks):
        host = _member(FIX / "dlrm_pytorch_et.tar.gz", f"dlrm_eg_{r}")
        kin = _member(FIX / "dlrm_kineto.tar.gz", f"worker{r}_")
        nodes = bench_convert.host_copies(host, args.copies)
        hhead = {k: v for k, v in host.items() if k != "nodes"}
        n = write_array_doc(args.out / f"host_rank{r}{ext}", hhead, "nodes", nodes, args.gzip)
        msg = f"rank {r}: {n} host nodes"
        if not args.host_only:
            khead = {k: v for k, v in kin.items() if k != "traceEvents"}
            events = kineto_copies(kin, args.copies, True)
            k = write_array_doc(
                args.out / f"kineto_rank{r}{ext}", khead, "traceEvents", events, args.gzip
            )
            msg += f", {k} Kineto events"
        print(msg, flush=True)


if __name__ == "__main__":
    main()
