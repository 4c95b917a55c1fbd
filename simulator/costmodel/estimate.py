"""Pricing compute that has no measured duration with the cost model.

Two kinds of ETs carry such nodes:

* converted from a host ET alone: every op is a CPU node marked `dur_estimated`, with
  its input shapes/types. Each op becomes what a GPU run does with it: the CPU node
  takes the host time of one op (dispatch, plus a launch when the op has a kernel), and
  an op with a GPU kernel gets a new node on a per-rank GPU stream
  (`ESTIMATED_STREAM`), launched by the CPU node, lasting the cost model's time. The
  CPU thus runs ahead of the GPU as in a real run. A collective also waits for the
  kernels launched before it (PyTorch makes the NCCL stream wait for the compute
  stream), and the op after a synchronising op (`item`, a device-to-host copy,
  `nonzero`) waits for the GPU to drain;
* from other producers: GPU compute nodes with `num_ops` / `tensor_size` and no
  duration: their duration becomes the roofline time (dtype `WORK_DTYPE`).

`estimate_graph` returns a new `RankGraph`; the original is not modified.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import fields, replace

import numpy as np

from lumos.converters.ops.args import DType
from lumos.converters.ops.flops import CostKind, OpCost, Unpriced, base_name, op_cost
from lumos.simulator.costmodel.roofline import CostModel
from lumos.simulator.graph import COMM_TYPES, COMP, RankGraph

ESTIMATED_STREAM = 1_000_000_007  # GPU stream of kernels the cost model adds
WORK_DTYPE = DType.BF16
SYNC_OPS = frozenset({"_local_scalar_dense", "item", "nonzero", "is_nonzero", "unique", "_unique2"})
log = logging.getLogger(__name__)


def needs_estimates(g: RankGraph) -> bool:
    """True when some node of `g` has no measured duration for the cost model to fill."""
    return bool(g.op_work) or any(g.type[i] == COMP for i in g.op_inputs)


def _work_cost(flops: float, nbytes: float) -> OpCost:
    kind = CostKind.MATMUL if flops > 0 else CostKind.MEMORY
    return OpCost(kind, flops, nbytes, WORK_DTYPE, True)


def _append(g: RankGraph, parents: list[int], durs: list[int], stream: int) -> RankGraph:
    """`g` plus one GPU node per parent (same name, on `stream`, after that parent)."""
    n, k = len(g), len(parents)
    if not k:
        return g
    changes: dict[str, object] = {}
    for f in fields(g):
        value = getattr(g, f.name)
        if isinstance(value, np.ndarray) and len(value) == n and f.name != "dep_idx":
            fill = {"is_cpu_op": False, "type": COMP, "gap_ns": 0, "comm_size": 0}.get(f.name, -1)
            changes[f.name] = np.concatenate([value, np.full(k, fill, value.dtype)])
    idx = np.asarray(parents, np.int64)
    changes["ids"] = np.concatenate([g.ids, g.ids.max(initial=0) + 1 + np.arange(k)])
    changes["name_idx"] = np.concatenate([g.name_idx, g.name_idx[idx]])
    changes["stream"] = np.concatenate([g.stream, np.full(k, stream, g.stream.dtype)])
    changes["dur_ns"] = np.concatenate([g.dur_ns, np.asarray(durs, g.dur_ns.dtype)])
    changes["dur_us_ns"] = np.concatenate([g.dur_us_ns, np.asarray(durs, g.dur_us_ns.dtype)])
    changes["sync_kind"] = np.concatenate([g.sync_kind, np.zeros(k, g.sync_kind.dtype)])
    changes["dep_ptr"] = np.concatenate([g.dep_ptr, g.dep_ptr[-1] + 1 + np.arange(k)])
    changes["dep_idx"] = np.concatenate([g.dep_idx, idx.astype(g.dep_idx.dtype)])
    return replace(g, **changes)  # type: ignore[arg-type]


def _add_deps(g: RankGraph, extra: dict[int, list[int]]) -> None:
    """Add predecessors (`extra[node] = [deps]`) to `g`'s CSR lists, in place."""
    if not extra:
        return
    lists = [g.deps(i).tolist() for i in range(len(g))]
    for v, deps in extra.items():
        lists[v] = list(dict.fromkeys(lists[v] + deps))
    ptr = np.zeros(len(lists) + 1, np.int64)
    np.cumsum([len(x) for x in lists], out=ptr[1:])
    g.dep_ptr = ptr
    g.dep_idx = np.asarray([d for x in lists for d in x], np.int32)


def estimate_graph(g: RankGraph, model: CostModel) -> RankGraph:
    """Durations for every node of `g` that has none, from `model` (see module doc)."""
    dur = g.dur_ns.copy()
    unpriced: Counter[str] = Counter()
    for i, (flops, nbytes) in g.op_work.items():
        dur[i] = model.time_ns(_work_cost(flops, nbytes))
    parents, kernel_durs = [], []
    sync_after: list[int] = []
    for i in sorted(g.op_inputs):
        if g.type[i] != COMP:
            continue
        name = g.name(i)
        cost = op_cost(name, *g.op_inputs[i])
        if isinstance(cost, Unpriced):
            unpriced[name] += 1
        priced = cost if isinstance(cost, OpCost) else None
        dur[i] = model.host_ns(priced, g.op_host_ops.get(i, 1))
        on_gpu = priced is not None and priced.on_gpu is not False
        if on_gpu and priced is not None and priced.kind is not CostKind.NO_KERNEL:
            parents.append(i)
            kernel_durs.append(model.time_ns(priced))
        if base_name(name) in SYNC_OPS or (priced and priced.kind is CostKind.TRANSFER):
            sync_after.append(i)
    if unpriced:
        top = ", ".join(f"{n} x{c}" for n, c in unpriced.most_common(8))
        log.info(
            "rank %d: %d ops without a cost formula (host time only): %s",
            g.rank,
            sum(unpriced.values()),
            top,
        )
    out = _append(
        replace(g, dur_ns=dur, dur_us_ns=np.maximum(dur, 0)), parents, kernel_durs, ESTIMATED_STREAM
    )
    _add_deps(out, _stream_waits(g, parents, sync_after, len(g)))
    return out


def _stream_waits(
    g: RankGraph, parents: list[int], sync_after: list[int], first_kernel: int
) -> dict[int, list[int]]:
    """Collectives wait for the kernels launched before them; the op after a sync waits
    for the GPU to drain (its last launched kernel)."""
    extra: dict[int, list[int]] = {}
    if not parents:
        return extra
    launch_pos = np.asarray(parents, np.int64)
    kernel_of = first_kernel + np.arange(len(parents))

    def last_kernel_before(i: int) -> int | None:
        k = int(np.searchsorted(launch_pos, i, side="right")) - 1
        return int(kernel_of[k]) if k >= 0 else None

    for i in np.flatnonzero(np.isin(g.type, COMM_TYPES)).tolist():
        k = last_kernel_before(i)
        if k is not None:
            extra.setdefault(i, []).append(k)
    for i in sync_after:
        k = last_kernel_before(i)
        nxt = _next_on_thread(g, i)
        if k is not None and nxt is not None:
            extra.setdefault(nxt, []).append(k)
    return extra


def _next_on_thread(g: RankGraph, i: int) -> int | None:
    same = np.flatnonzero((g.tid == g.tid[i]) & (np.arange(len(g)) > i))
    return int(same[0]) if same.size else None
