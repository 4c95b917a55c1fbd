"""Host-ET-only conversion: which ops become tasks, and their GPU time vs measured.

For one rank of a host ET: the tasks `host_graph` keeps (by name), against the old rule
(every leaf op); the GPU time the cost model gives the kept ops (`op_cost` +
`CostModel.time_ns`, ops on the GPU only), by name, with what is unpriced. With the
matching Kineto trace: the measured GPU time of the last ProfilerStep, each kernel /
memcpy / memset charged to the innermost `cpu_op` around its launch (NCCL left out).

    python scripts/hostonly_check.py HOST_ET [--kineto KINETO] [--rank R] --hw v100
"""

from __future__ import annotations

import argparse
import gzip
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from lumos.converters.ops.flops import OpCost, op_cost
from lumos.converters.pytorch.comm_tasks import CommContext
from lumos.converters.pytorch.host_et import HostTrace, load_host_et
from lumos.converters.pytorch.host_graph import build_host_tasks, step_rows
from lumos.converters.pytorch.inputs import plan
from lumos.converters.pytorch.tasks import TaskKind
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.roofline import CostModel


def old_rule(host: HostTrace) -> Counter[str]:
    """Names of the ops the leaf-only rule kept (before host_ops)."""
    rows, _ = step_rows(host)
    parents = set(host.parent[rows].tolist())
    out: Counter[str] = Counter()
    for r in rows.tolist():
        name = host.name_of(r)
        comm = name.startswith(("nccl:", "gloo:"))
        if name.startswith(("[pytorch|profiler", "ProfilerStep#")):
            continue
        if comm or int(host.id[r]) not in parents:
            out[name] += 1
    return out


def priced(host: HostTrace, model: CostModel) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """Kept task names, predicted GPU ns by name, unpriced GPU-side ops by name."""
    table, _ = build_host_tasks(host, CommContext(0, 1, {}, host))
    kept: Counter[str] = Counter()
    gpu: Counter[str] = Counter()
    unpriced: Counter[str] = Counter()
    for t in range(len(table)):
        name = table.name_of(t)
        kept[name] += 1
        if table.kind[t] != TaskKind.CPU:
            continue
        ins = host.io_of(int(table.host[t]))[0]
        cost = op_cost(name, ins.shapes, ins.types, ins.values) if ins else op_cost(name, "", "")
        if isinstance(cost, OpCost):
            if cost.on_gpu is not False:
                gpu[name] += model.time_ns(cost)
        else:
            unpriced[name] += 1
    return kept, gpu, unpriced


def _kineto_events(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".gz":
        return orjson.loads(gzip.open(path).read())["traceEvents"]
    return orjson.loads(path.read_bytes())["traceEvents"]


def measured(path: Path) -> tuple[float, Counter[str], float]:
    """(step ns, GPU ns by launching op, NCCL ns) of the last ProfilerStep."""
    ev = [e for e in _kineto_events(path) if e.get("ph") == "X"]
    steps = [e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")]
    step = max(steps, key=lambda e: e["ts"])
    t0, t1 = step["ts"], step["ts"] + step["dur"]
    gpu = {}
    for e in ev:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and t0 <= e["ts"] < t1:
            c = e.get("args", {}).get("correlation")
            gpu[c] = gpu.get(c, 0.0) + e["dur"]
    by_tid: dict[Any, list[dict[str, Any]]] = {}
    for e in ev:
        if e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver"):
            by_tid.setdefault(e["tid"], []).append(e)
    out: Counter[str] = Counter()
    nccl = 0.0
    for events in by_tid.values():
        events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict[str, Any]] = []
        for e in events:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
                stack.pop()
            c = e.get("args", {}).get("correlation")
            if e.get("cat") != "cpu_op" and c in gpu:
                ops = [s for s in stack if s.get("cat") == "cpu_op"]
                owner = ops[-1]["name"] if ops else "(no op)"
                if owner == "record_param_comms" or "nccl" in owner:
                    nccl += gpu[c] * 1e3
                else:
                    out[owner] += gpu[c] * 1e3
            stack.append(e)
    return step["dur"] * 1e3, out, nccl


def _kineto_of_rank(path: Path, rank: int, tmp: Path) -> Path:
    if path.suffix != ".gz" or not tarfile.is_tarfile(path):
        return path
    with tarfile.open(path) as tar:
        for m in tar.getmembers():
            if m.isfile() and f"worker{rank}_" in m.name:
                tar.extract(m, tmp, filter="data")
                return tmp / m.name
    raise SystemExit(f"no worker{rank} trace in {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("host_et")
    ap.add_argument("--kineto")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--hw", default="a100")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    items = [i for i in plan([a.host_et]) if i.host is not None and i.rank == a.rank]
    host = load_host_et(items[0].host)  # type: ignore[arg-type]
    model = CostModel.for_gpu(load_system(a.hw).gpu)
    before = old_rule(host)
    kept, gpu, unpriced = priced(host, model)
    print(f"tasks: leaf rule {sum(before.values())}, now {sum(kept.values())}")
    print("changed counts (name: leaf rule -> now):")
    for name in sorted(set(before) | set(kept), key=lambda n: -abs(kept[n] - before[n])):
        if kept[name] != before[name]:
            print(f"  {name}: {before[name]} -> {kept[name]}")
    print(f"predicted GPU time of kept ops on {a.hw}: {sum(gpu.values()) / 1e6:.3f} ms")
    print("unpriced ops (host time only):", dict(unpriced.most_common(12)))
    if a.kineto:
        tmp = Path("/tmp/lumos_hostonly_check")
        step_ns, meas, nccl = measured(_kineto_of_rank(Path(a.kineto), a.rank, tmp))
        total = sum(meas.values())
        print(
            f"measured: step {step_ns / 1e6:.3f} ms, GPU compute {total / 1e6:.3f} ms, "
            f"NCCL kernels {nccl / 1e6:.3f} ms"
        )
        names = sorted(set(meas) | set(gpu), key=lambda n: -max(meas[n], gpu[n]))
        print(f"{'op':60s} {'measured us':>12s} {'predicted us':>12s}")
        for n in names[: a.top]:
            print(f"{n[:60]:60s} {meas[n] / 1e3:12.1f} {gpu[n] / 1e3:12.1f}")
    print("kept (top):", ", ".join(f"{n} x{c}" for n, c in kept.most_common(a.top)))


if __name__ == "__main__":
    main()
