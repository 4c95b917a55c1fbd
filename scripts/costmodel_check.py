"""Cost model vs measured GPU kernel times, per op, on real Kineto traces.

Each GPU kernel (and memcpy/memset) is linked to the CPU op that launched it: kernel
`correlation` -> its runtime launch call -> the innermost `cpu_op` on the same thread
whose interval contains the call. An op's measured time is the sum of its kernels; its
predicted time is `CostModel.time_ns(op_cost(name, Input Dims, Input type, Concrete
Inputs))` on the trace's GPU. Communication kernels (NCCL) are left out. Printed per
trace: per op name the count, measured and predicted sums and the median relative error;
and the aggregate: predicted vs measured GPU time of the step's priced ops, plus how much
measured kernel time could not be priced (op without a formula, or no shapes recorded).

Calibration: `--fit-ranks` fits the kernel overhead and one scale per efficiency curve
on those DLRM ranks and reports the error on the other ranks (held out). Without it,
the shipped calibration files are used as they are.

    python scripts/costmodel_check.py [--fit] [--only dlrm bert alexnet]
"""

from __future__ import annotations

import argparse
import gzip
import math
import os
import statistics
import sys
import tarfile
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from lumos.converters.ops.flops import CostKind, OpCost, Unpriced, op_cost
from lumos.hwconfigs.calibration_tables import ComputeCalibration, load_calibration
from lumos.hwconfigs.load import load_gpu
from lumos.hwconfigs.schema import EfficiencyPoint, GpuSpec
from lumos.simulator.costmodel.roofline import CostModel

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("LUMOS_FIXTURES", ROOT.parent / "shared" / "fixtures"))
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


@dataclass(slots=True)
class OpSample:
    """One CPU op instance with the GPU work it launched."""

    name: str
    measured_ns: float
    kernels: int
    cost: OpCost | Unpriced


@dataclass(slots=True)
class TraceSamples:
    label: str
    gpu: str
    samples: list[OpSample] = field(default_factory=list)
    comm_ns: float = 0.0
    unlinked_ns: float = 0.0
    step_ns: float = 0.0


def _events(path: Path) -> list[dict[str, Any]]:
    if path.suffix != ".gz":
        return orjson.loads(path.read_bytes())["traceEvents"]
    with gzip.open(path) as f:
        raw = f.read()
    return orjson.loads(raw)["traceEvents"]


def _step_window(events: list[dict[str, Any]]) -> tuple[float, float]:
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    if not steps:
        return float("-inf"), float("inf")
    last = max(steps, key=lambda e: e["ts"])
    return last["ts"], last["ts"] + last["dur"]


def collect(label: str, events: list[dict[str, Any]], gpu: str) -> TraceSamples:
    return _collect(label, gpu, events)


def _collect(label: str, gpu: str, events: list[dict[str, Any]]) -> TraceSamples:
    """Link kernels to ops in one Kineto trace and price the ops."""
    out = TraceSamples(label, gpu)
    lo, hi = _step_window(events)
    out.step_ns = (hi - lo) * 1e3 if hi != float("inf") else 0.0
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})
    }
    by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for op in ops:
        by_thread[(op["pid"], op["tid"])].append(op)
    arrays = {}
    for key, lst in by_thread.items():
        lst.sort(key=lambda e: e["ts"])
        ts = np.array([e["ts"] for e in lst])
        arrays[key] = (ts, ts + np.array([e["dur"] for e in lst]), lst)
    per_op: dict[int, list[float]] = defaultdict(list)
    op_of: dict[int, dict[str, Any]] = {}
    for k in events:
        if k.get("cat") not in GPU_CATS:
            continue
        launch = launches.get(k.get("args", {}).get("correlation"))
        dur = float(k.get("dur", 0)) * 1e3
        if launch is None or not lo <= launch["ts"] <= hi:
            if launch is None and lo <= k["ts"] <= hi:
                out.unlinked_ns += dur
            continue
        if str(k["name"]).startswith("nccl"):
            out.comm_ns += dur
            continue
        found = arrays.get((launch["pid"], launch["tid"]))
        if found is None:
            out.unlinked_ns += dur
            continue
        ts, te, lst = found
        inside = np.flatnonzero((ts <= launch["ts"]) & (te >= launch["ts"]))
        if not inside.size:
            out.unlinked_ns += dur
            continue
        op = lst[int(inside[-1])]
        per_op[id(op)].append(dur)
        op_of[id(op)] = op
    for key, durs in per_op.items():
        op = op_of[key]
        args = op.get("args", {})
        if "Input Dims" in args:
            cost = op_cost(
                op["name"],
                args["Input Dims"],
                args.get("Input type", []),
                args.get("Concrete Inputs"),
            )
        else:
            cost = Unpriced(f"{op['name']}: no shapes recorded (record_shapes off)")
        out.samples.append(OpSample(op["name"], sum(durs), len(durs), cost))
    return out


def _dlrm(rank: int) -> tuple[str, list[dict[str, Any]]]:
    with tarfile.open(FIXTURES / "param/et_replay/tests/inputs/dlrm_kineto.tar.gz") as tar:
        member = next(m for m in tar.getmembers() if f"/worker{rank}_" in m.name)
        data = tar.extractfile(member)
        assert data is not None
        return f"dlrm rank {rank}", orjson.loads(data.read())["traceEvents"]


TRACES = {
    "dlrm": ("v100_sxm2", [lambda r=r: _dlrm(r) for r in range(8)]),
    "bert": (
        "h100_sxm",
        [
            lambda: (
                "bert-small H100",
                _events(
                    FIXTURES
                    / "TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz"
                ),
            )
        ],
    ),
    "alexnet": (
        "a100_sxm_80gb",
        [
            lambda: (
                "alexnet A100",
                _events(
                    FIXTURES / "HolisticTraceAnalysis/tests/data/critical_path/alexnet/"
                    "benchmark_result_2869224_1695835535_trace.json.gz"
                ),
            )
        ],
    ),
}


def predicted(model: CostModel, s: OpSample) -> float | None:
    if isinstance(s.cost, Unpriced) or s.cost.kind is CostKind.NO_KERNEL:
        return None
    return float(model.time_ns(s.cost))


def report(traces: list[TraceSamples], models: dict[str, CostModel]) -> None:
    """Per op name and aggregate error tables."""
    rows: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    unpriced: dict[str, float] = defaultdict(float)
    print("\n## Aggregate per trace (step's GPU compute time, NCCL kernels excluded)\n")
    print(
        "| trace | GPU | kernels linked | measured priced µs | predicted µs | error | unpriced µs |"
    )
    print("|---|---|---|---|---|---|---|")
    for t in traces:
        model = models[t.gpu]
        meas = pred = miss = 0.0
        n = 0
        for s in t.samples:
            p = predicted(model, s)
            n += s.kernels
            if p is None:
                miss += s.measured_ns
                reason = s.cost.reason if isinstance(s.cost, Unpriced) else f"{s.name}: no kernel"
                unpriced[reason] += s.measured_ns
                continue
            meas += s.measured_ns
            pred += p
            rows[(t.gpu, s.name)].append((s.measured_ns, p))
        err = (pred - meas) / meas * 100 if meas else float("nan")
        print(
            f"| {t.label} | {t.gpu} | {n} | {meas / 1e3:.1f} | {pred / 1e3:.1f} | "
            f"{err:+.1f}% | {(miss + t.unlinked_ns) / 1e3:.1f} |"
        )
    print("\n## Per op type (all traces of a GPU pooled)\n")
    print("| GPU | op | n | measured µs | predicted µs | sum error | median abs error |")
    print("|---|---|---|---|---|---|---|")
    for (gpu, name), pairs in sorted(rows.items(), key=lambda kv: -sum(m for m, _ in kv[1])):
        m = sum(a for a, _ in pairs)
        p = sum(b for _, b in pairs)
        med = statistics.median(abs(b - a) / a for a, b in pairs if a > 0) * 100
        print(
            f"| {gpu} | {name} | {len(pairs)} | {m / 1e3:.1f} | {p / 1e3:.1f} | "
            f"{(p - m) / m * 100:+.0f}% | {med:.0f}% |"
        )
    print("\n## Unpriced measured GPU time (top)\n")
    for reason, ns in sorted(unpriced.items(), key=lambda kv: -kv[1])[:12]:
        print(f"- {reason}: {ns / 1e3:.1f} µs")


def _shifted(cal: ComputeCalibration, **changes: Any) -> ComputeCalibration:
    """`cal` with overheads replaced and curve sizes multiplied (`mm`, `mem` factors)."""

    def move(points: tuple[EfficiencyPoint, ...], f: float) -> tuple[EfficiencyPoint, ...]:
        return tuple(EfficiencyPoint(max(1, int(p.size_bytes * f)), p.efficiency) for p in points)

    mm, mem = changes.pop("mm", 1.0), changes.pop("mem", 1.0)
    return replace(
        cal,
        matmul_efficiency=move(cal.matmul_efficiency, mm),
        conv_efficiency=move(cal.conv_efficiency, mm),
        attention_efficiency=move(cal.attention_efficiency, mm),
        memory_efficiency=move(cal.memory_efficiency, mem),
        **changes,
    )


def _log_error(model: CostModel, samples: list[OpSample]) -> float:
    errs = [
        abs(math.log(p / s.measured_ns))
        for s in samples
        if s.measured_ns > 0 and (p := predicted(model, s))
    ]
    return sum(errs) / len(errs) if errs else float("inf")


MATMUL_KINDS = (CostKind.MATMUL, CostKind.CONV, CostKind.ATTENTION)
FACTORS = [10 ** (k / 4) for k in range(-8, 13)]
OVERHEADS = [float(x) for x in range(500, 8001, 250)]


def _grid(
    spec: GpuSpec, cal: ComputeCalibration, samples: list[OpSample], key: str, curve: str | None
) -> ComputeCalibration:
    """Best (overhead `key`, size factor of `curve`) for `samples` by mean |log error|."""
    best = (float("inf"), cal)
    for overhead in OVERHEADS:
        for f in FACTORS if curve else [1.0]:
            trial = _shifted(cal, **{key: overhead}, **({curve: f} if curve else {}))
            err = _log_error(CostModel.for_gpu(spec, trial), samples)
            if err < best[0]:
                best = (err, trial)
    return best[1]


def fit(gpu: str, train: list[OpSample]) -> tuple[CostModel, str]:
    """Fit, by class of op: elementwise kernels (kernel overhead, byte-curve shift), then
    reductions (their overhead), then matmul-like kernels (overhead, FLOP-curve shift);
    each minimises the mean |log(predicted / measured)| over its `train` samples."""
    spec = load_gpu(gpu)
    cal = load_calibration(gpu)

    def of(*kinds: CostKind) -> list[OpSample]:
        return [s for s in train if isinstance(s.cost, OpCost) and s.cost.kind in kinds]

    cal = _grid(spec, cal, of(CostKind.MEMORY, CostKind.TRANSFER), "kernel_overhead_ns", "mem")
    cal = _grid(spec, cal, of(CostKind.REDUCTION), "reduction_overhead_ns", None)
    cal = _grid(spec, cal, of(*MATMUL_KINDS), "matmul_overhead_ns", "mm")
    base = load_calibration(gpu)
    note = (
        f"kernel/reduction/matmul overhead {cal.kernel_overhead_ns:.0f}/"
        f"{cal.reduction_overhead_ns:.0f}/{cal.matmul_overhead_ns:.0f} ns; "
        f"matmul curve {_pts(cal.matmul_efficiency)} (was {_pts(base.matmul_efficiency)}); "
        f"memory curve {_pts(cal.memory_efficiency)}"
    )
    return CostModel.for_gpu(spec, cal), note


def _pts(points: tuple[EfficiencyPoint, ...]) -> str:
    return "[" + ", ".join(f"[{p.size_bytes:.3g}, {p.efficiency}]" for p in points) + "]"


def _split(traces: list[TraceSamples]) -> tuple[list[OpSample], list[TraceSamples]]:
    """Training samples and held-out traces: DLRM ranks 0-3 train (4-7 held out); a
    single trace trains on its even op instances and is tested on the odd ones."""
    if len(traces) > 1:
        half = len(traces) // 2
        return [s for t in traces[:half] for s in t.samples], traces[half:]
    t = traces[0]
    held = TraceSamples(t.label + " (odd ops, held out)", t.gpu, t.samples[1::2])
    return t.samples[::2], [held]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=sorted(TRACES), default=sorted(TRACES))
    ap.add_argument("--fit", action="store_true", help="fit on a subset, report held-out")
    args = ap.parse_args(argv)
    traces, models = [], {}
    for key in args.only:
        gpu, loaders = TRACES[key]
        models[gpu] = CostModel.for_gpu(load_gpu(gpu))
        mine = [collect(*load(), gpu=gpu) for load in loaders]
        if args.fit and any(not isinstance(s.cost, Unpriced) for t in mine for s in t.samples):
            train, mine = _split(mine)
            models[gpu], note = fit(gpu, train)
            print(f"fitted {gpu} on {len(train)} op instances: {note}")
        traces += mine
    report(traces, models)
    return 0


if __name__ == "__main__":
    sys.exit(main())
