"""Edit: another hidden size, FFN size or sequence length (or micro-batch size), by
rewriting shapes and re-timing each op from its measured time.

Every node's input shapes are rewritten with a `DimMap`; each priced leaf op
(`ops.op_groups`) gets its work nodes' durations multiplied by the timing model's ratio
between its new and old FLOPs/bytes (`timing`): the cost model's on a GPU trace, the
trace's own fit on a CPU-only one. Communication sizes scale by the caller's factors:
data-parallel gradients with the parameters, activations (tensor/pipeline/context
parallel) with B·S·H. On a CPU-only trace, an op that reaches or leaves the step's
largest allocation size gains or gives back fresh-page faults (`pages`).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import get_attr
from lumos.converters.ops.cost import OpCost
from lumos.proto import pb
from lumos.simulator.costmodel.roofline import CostModel
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.dims import DimMap
from lumos.simulator.whatif.etset import EtSet, RankEt
from lumos.simulator.whatif.netfit import NetworkFit, fit_network
from lumos.simulator.whatif.ops import cost_of, op_groups
from lumos.simulator.whatif.pages import PageShift, PageTally
from lumos.simulator.whatif.timing import TraceFit, fit_trace, model_ratio
from lumos.simulator.whatif.vocab import find_vocab
from lumos.simulator.whatif.weights import find_weights

#: comm node -> factor on its size (1.0 = unchanged)
CommScale = Callable[[pb.Node], float]


def trace_fit(r: RankEt) -> TraceFit:
    """The per-class time lines of a CPU-only rank's own leaf ops: those fitted on the
    traced step (kept in the metadata by `remember_fit`), else fitted now."""
    kept = get_attr(r.metadata, cv.META_WHATIF_FIT)
    if kept:
        return TraceFit.from_json(kept)
    samples: list[tuple[OpCost, int]] = []
    names: list[str] = []
    for g in op_groups(r):
        cost = cost_of(g.name, r.nodes[g.inputs_at].inputs)
        if cost is not None:
            samples.append((cost, sum(nd.duration(r.nodes[i]) for i in g.work)))
            names.append(g.name)
    return fit_trace(samples, names)


def remember_fit(r: RankEt) -> RankEt:
    """The rank with its fitted lines stored in its metadata (CPU-only ranks), so edits
    of edits scale by the traced step's lines and an edit and its inverse cancel."""
    if any(nd.on_gpu(n) for n in r.nodes) or get_attr(r.metadata, cv.META_WHATIF_FIT):
        return r
    meta = pb.GlobalMetadata()
    meta.CopyFrom(r.metadata)
    nd.put(meta, cv.META_WHATIF_FIT, trace_fit(r).to_json(), "string_val")  # type: ignore[arg-type]
    return RankEt(r.rank, meta, r.nodes)


def reshape_rank(
    r: RankEt,
    dmap: DimMap,
    comm_scale: CommScale | None = None,
    model: CostModel | None = None,
    fit: TraceFit | None = None,
    net: NetworkFit | None = None,
    tally: PageTally | None = None,
    vocab: dict[int, int] | None = None,
) -> RankEt:
    """One rank with shapes rewritten and work re-timed (see module doc); `tally`
    collects what the host page model did (`pages`), `vocab` {rank: the vocabulary the
    rewrite kept, 0 if no LM head was found} (`vocab.Vocab.size`)."""
    nodes = [nd.clone(n) for n in r.nodes]
    weights = find_weights(r.nodes, dmap.dims.seq if dmap.dims else -1)
    found = find_vocab(r.nodes, weights)
    if vocab is not None:
        vocab[r.rank] = found.size
    dmap = dmap.with_weights(weights, found)
    gpu = any(nd.on_gpu(n) for n in nodes)
    if not gpu and fit is None:
        fit = trace_fit(r)
    groups = op_groups(r)
    shift = None
    if not gpu:
        at = [g.inputs_at for g in groups]
        shift = PageShift.of(r.nodes, at, lambda i: _rewrite_outputs(dmap, r.nodes[i], i))
    for g in groups:
        inputs = r.nodes[g.inputs_at].inputs
        old = cost_of(g.name, inputs)
        new = cost_of(g.name, inputs, _rewrite(dmap, r.nodes[g.inputs_at], g.inputs_at))
        if old is None or new is None:
            continue
        if gpu and model is not None:
            ratio = model_ratio(model, old, new)
        elif fit is not None:
            ratio = fit.ratio(old, new, g.name)
        else:
            ratio = 1.0
        for i in g.work:
            nd.set_duration(nodes[i], round(nd.duration(nodes[i]) * ratio))
        if shift is not None and g.work:
            traced = sum(nd.duration(r.nodes[i]) for i in g.work)
            extra = shift.retime(g.inputs_at, traced, ratio, tally) - round(traced * ratio)
            if extra:
                top = max(g.work, key=lambda i: nd.duration(nodes[i]))
                nd.set_duration(nodes[top], nd.duration(nodes[top]) + extra)
    for i, n in enumerate(nodes):
        if n.inputs.shapes:
            n.inputs.shapes = _rewrite(dmap, n, i)
        if n.outputs.shapes:
            n.outputs.shapes = _rewrite_outputs(dmap, r.nodes[i], i)
        if nd.is_comm(n) and comm_scale is not None:
            factor = comm_scale(n)
            if factor != 1.0:
                size = nd.int_attr(n, "comm_size", 0)
                nd.put(n, "comm_size", round(size * factor), "int64_val")
                if net is not None:
                    _retime_comm(n, net, size, round(size * factor))
    return RankEt(r.rank, r.metadata, tuple(nodes))


def _rewrite(dmap: DimMap, n: pb.Node, at: int) -> str:
    """Node `n`'s (at index `at`) input shapes rewritten by `dmap`."""
    optim = nd.tags(n)[0] == "optim"
    return dmap.rewrite(n.inputs.shapes, n.inputs.values, n.name, at, optim)


#: GEMMs whose one output is `a[:-1] + b[-1:]` of operands (a, b)
_GEMM_OUT = {"aten::mm": (0, 1), "aten::bmm": (0, 1), "aten::addmm": (1, 2)}
_GEMM_OUT |= {"aten::baddbmm": (1, 2)}


def _rewrite_outputs(dmap: DimMap, n: pb.Node, at: int) -> str:
    """Node `n`'s (at index `at`) output shapes rewritten by `dmap`; a GEMM's output
    follows its rewritten operands (its own layout can be ambiguous where they are not)."""
    optim = nd.tags(n)[0] == "optim"
    pos = _GEMM_OUT.get(n.name)
    if pos is not None:
        try:
            ins, out = json.loads(n.inputs.shapes), json.loads(n.outputs.shapes)
            new = json.loads(_rewrite(dmap, n, at))
            a, b = (ins[k] for k in pos)
            if out == [a[:-1] + b[-1:]]:
                return json.dumps([new[pos[0]][:-1] + new[pos[1]][-1:]], separators=(",", ":"))
        except (ValueError, TypeError, IndexError, KeyError):
            pass
    return dmap.rewrite(n.outputs.shapes, n.outputs.values, "", at, optim)


def _retime_comm(n: pb.Node, net: NetworkFit, size: int, new_size: int) -> None:
    """A collective's transfer re-priced on its group's fitted line for the new size, the
    rest of its measured time kept (`netfit.LinkFit.retime`)."""
    if n.type == pb.COMM_COLL_NODE:
        members = nd.attr(n, "pg_ranks")
        width = len(members) if isinstance(members, list) and members else 2
        link = net.for_group(tuple(members) if isinstance(members, list) else ())
        kind = nd.int_attr(n, "comm_type", 0)
    else:
        link, width, kind = net.overall, 2, -1
    nd.set_duration(n, round(link.retime(nd.comm_duration(n), kind, size, width, width, new_size)))


def reshape(
    ets: EtSet,
    dmap: DimMap,
    comm_scale: CommScale | None = None,
    model: CostModel | None = None,
    tally: PageTally | None = None,
    vocab: dict[int, int] | None = None,
) -> EtSet:
    """Every rank reshaped with the same map (communication re-timed on the trace's
    fitted network); `tally` and `vocab` as `reshape_rank`."""
    net = fit_network(ets) if comm_scale is not None else None
    return ets.with_ranks(
        [reshape_rank(r, dmap, comm_scale, model, None, net, tally, vocab) for r in ets.ranks]
    )
