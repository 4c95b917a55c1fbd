"""Which traced node does an op's work, and what that work is (FLOPs and bytes).

Converters split a host op into segments around its children (all segments share the
op's `rf_id`; one of them carries the inputs). An `OpGroup` gathers them per thread. The
work of a *leaf* op (no priced op inside its span) is done in its longest segment on a
CPU-only trace, or in the GPU kernels launched inside its span on a GPU trace; parents
(`aten::linear` around `aten::addmm`) are skipped so nothing is counted twice. FLOPs and
bytes come from `lumos.converters.ops.flops`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass, field

from lumos.converters.ops.cost import CostKind, OpCost
from lumos.converters.ops.flops import op_cost
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.etset import RankEt

_ALIASES = (("_for_cpu", ""),)


@dataclass(slots=True)
class OpGroup:
    """One host op: its segments (positions on its thread), inputs, and the nodes doing
    its work (`work`: the longest segment, or its kernels)."""

    name: str
    segments: list[int]
    inputs_at: int
    work: list[int] = field(default_factory=list)

    @property
    def span(self) -> tuple[int, int]:
        return self.segments[0], self.segments[-1]


def cost_of(name: str, inputs: pb.IOInfo, shapes: str | None = None) -> OpCost | None:
    """FLOPs/bytes of an op from its inputs (with `shapes` instead of the traced ones)."""
    for alias, repl in _ALIASES:
        name = name.replace(alias, repl)
    cost = op_cost(
        name, shapes if shapes is not None else inputs.shapes, inputs.types, inputs.values
    )
    if not isinstance(cost, OpCost) or cost.kind is CostKind.NO_KERNEL:
        return None
    return cost


def op_groups(r: RankEt) -> list[OpGroup]:
    """The priced leaf ops of a rank with the nodes that do their work."""
    by_key: dict[tuple[object, ...], OpGroup] = {}
    gpu = [i for i, n in enumerate(r.nodes) if nd.on_gpu(n)]
    for i, n in enumerate(r.nodes):
        proc = nd.processor(n)
        if nd.on_gpu(n) or nd.is_comm(n) or proc[0] not in ("tid", "cpu"):
            continue
        rf = nd.int_attr(n, "rf_id")
        # copies of a layer (or micro-batch) share the traced rf_id: the tags tell them apart
        key: tuple[object, ...] = (proc, rf, n.name, *nd.tags(n)) if rf >= 0 else (i,)
        g = by_key.get(key)
        if g is None:
            g = by_key[key] = OpGroup(n.name, [], -1)
        g.segments.append(i)
        if n.inputs.shapes and g.inputs_at < 0:
            g.inputs_at = i
    per_thread: dict[nd.Proc, list[tuple[OpGroup, OpCost]]] = defaultdict(list)
    for g in by_key.values():
        cost = cost_of(g.name, r.nodes[g.inputs_at].inputs) if g.inputs_at >= 0 else None
        if cost is not None:
            per_thread[nd.processor(r.nodes[g.segments[0]])].append((g, cost))
    leaves: list[OpGroup] = []
    for priced in per_thread.values():
        priced.sort(key=lambda gc: gc[0].span[0])
        firsts = [g.span[0] for g, _ in priced]
        for g, cost in priced:
            lo, hi = g.span
            inner = priced[bisect_right(firsts, lo) : bisect_right(firsts, hi)]
            if not any(_same_work(cost, c) for _, c in inner):
                leaves.append(g)
    _attach_work(r, leaves, gpu)
    return [g for g in leaves if g.work]


def _same_work(parent: OpCost, child: OpCost) -> bool:
    """The child does the parent's work (`aten::linear` -> `aten::addmm`), not a side job
    (the bias copy inside `aten::addmm`)."""
    if parent.flops > 0 and parent.kind in (CostKind.MATMUL, CostKind.ATTENTION, CostKind.CONV):
        return child.kind is parent.kind and child.flops >= 0.5 * parent.flops
    return child.bytes >= 0.5 * parent.bytes


def _attach_work(r: RankEt, leaves: list[OpGroup], gpu: list[int]) -> None:
    if not gpu:
        for g in leaves:
            g.work = [max(g.segments, key=lambda i: nd.duration(r.nodes[i]))]
        return
    index = {n.id: i for i, n in enumerate(r.nodes)}
    spans: dict[nd.Proc, list[tuple[int, int, int]]] = defaultdict(list)
    for k, g in enumerate(leaves):
        spans[nd.processor(r.nodes[g.segments[0]])].append((*g.span, k))
    starts = {p: [s for s, _, _ in sorted(v)] for p, v in spans.items()}
    ordered = {p: sorted(v) for p, v in spans.items()}
    for i in gpu:
        for d in nd.deps(r.nodes[i]):
            j = index.get(d)
            if j is None or nd.on_gpu(r.nodes[j]):
                continue
            proc = nd.processor(r.nodes[j])
            k = bisect_right(starts.get(proc, []), j) - 1
            if k >= 0 and ordered[proc][k][0] <= j <= ordered[proc][k][1]:
                leaves[ordered[proc][k][2]].work.append(i)
            break
