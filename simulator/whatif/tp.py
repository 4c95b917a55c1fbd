"""Edit: another tensor-parallel degree (Megatron-style sharding of each layer).

Within the layers, every GEMM and attention op is sharded (QKV and FC1 by columns, the
attention projection and FC2 by rows, attention by heads), and so is element-wise work on
sharded activations (tensors with a 3H or 4H dimension: the fused QKV output, the MLP's
hidden): their FLOPs and bytes scale by `t_old / t_new` and their measured time by the
timing model's ratio (`timing`). Layer norms and residual adds stay whole (no sequence
parallelism). A trace without tensor parallelism gets the two all-reduces per layer and
pass Megatron issues — after the row-parallel GEMMs in forward (the 2nd and 4th of the
layer), after the column-parallel input-gradient GEMMs in backward (the last GEMM of
each half) — of `B x S x H` activations, on the op's own thread or stream, timed by the
trace's fitted network; a trace with tensor parallelism has its groups resized and its
collectives re-timed by the fitted ratio. Ranks: `replica x t + j`, tensor parallelism
innermost.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import get_attr, make_attr
from lumos.converters.ops.cost import CostKind
from lumos.errors import ConfigError
from lumos.proto import pb
from lumos.simulator.costmodel.roofline import CostModel
from lumos.simulator.network.api import ALL_REDUCE
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.assemble import assemble, source_procs
from lumos.simulator.whatif.dims import ModelDims, infer_dims
from lumos.simulator.whatif.etset import EtSet, RankEt, process_groups
from lumos.simulator.whatif.groups import Members, members_of, relabel, roles_by_members
from lumos.simulator.whatif.netfit import LinkFit, fit_network
from lumos.simulator.whatif.ops import OpGroup, cost_of, op_groups
from lumos.simulator.whatif.reshape import trace_fit
from lumos.simulator.whatif.timing import model_ratio

_SHARDED = (CostKind.MATMUL, CostKind.ATTENTION, CostKind.CONV)


def tp_degree(ets: EtSet) -> int:
    """Size of the tensor-parallel groups (1 when none)."""
    tp = [m for m, role in roles_by_members(ets).items() if role == "tp"]
    return max((len(m) for m in tp), default=1)


def _sharded(r: RankEt, g: OpGroup, kind: CostKind, dims: ModelDims) -> bool:
    if kind in _SHARDED:
        return True
    wide = {3 * dims.hidden, 4 * dims.hidden}
    return any(f",{d}]" in r.nodes[g.inputs_at].inputs.shapes for d in wide) or any(
        f"[{d}," in r.nodes[g.inputs_at].inputs.shapes for d in wide
    )


def _reshard(
    r: RankEt, old_share: float, new_share: float, dims: ModelDims, model: CostModel | None
) -> tuple[list[pb.Node], list[int]]:
    """Copies of the rank's nodes with sharded work re-timed; the anchors (work nodes of
    the layers' GEMMs after which Megatron all-reduces), in order."""
    nodes = [nd.clone(n) for n in r.nodes]
    gpu = any(nd.on_gpu(n) for n in nodes)
    fit = None if gpu else trace_fit(r)
    gemms: dict[tuple[str, int], list[OpGroup]] = {}
    for g in op_groups(r):
        phase, layer, _ = nd.tags(r.nodes[g.segments[0]])
        if layer < 0 or phase not in ("fwd", "bwd"):
            continue
        old = cost_of(g.name, r.nodes[g.inputs_at].inputs)
        if old is None or not _sharded(r, g, old.kind, dims):
            continue
        if old.kind is CostKind.MATMUL:
            gemms.setdefault((phase, layer), []).append(g)
        cur = replace(old, flops=old.flops * old_share, bytes=old.bytes * old_share)
        new = replace(old, flops=old.flops * new_share, bytes=old.bytes * new_share)
        if fit is not None:
            ratio = fit.ratio(cur, new, g.name)
        elif model is not None:
            ratio = model_ratio(model, cur, new)
        else:
            ratio = new_share / old_share
        for i in g.work:
            nd.set_duration(nodes[i], round(nd.duration(nodes[i]) * ratio))
    anchors = []
    for (phase, _), gs in gemms.items():
        gs.sort(key=lambda g: g.span[0])
        if phase == "fwd":
            picks = [gs[1], gs[3]] if len(gs) >= 4 else gs[-1:]
        else:
            half = max(1, len(gs) // 2)
            picks = [gs[half - 1], gs[-1]] if len(gs) >= 2 else gs[-1:]
        anchors += [max(g.work) for g in picks]
    return nodes, sorted(set(anchors))


def _all_reduce(anchor: pb.Node, new_id: int, size: int, link: LinkFit, t: int) -> pb.Node:
    n = pb.Node(id=new_id, name="whatif:tp_all_reduce", type=pb.COMM_COLL_NODE)
    n.data_deps.append(anchor.id)
    where = (cv.STREAM, nd.int_attr(anchor, cv.STREAM))
    if where[1] < 0:
        where = (cv.TID, nd.int_attr(anchor, cv.TID))
    n.attr.extend(
        [make_attr("comm_type", ALL_REDUCE), make_attr("comm_size", size), make_attr(*where)]
    )
    nd.set_duration(n, round(link.time_ns(ALL_REDUCE, size, t)))
    phase, layer, mb = nd.tags(anchor)
    nd.set_tags(n, phase, layer, mb)
    return n


def _pieces(nodes: list[pb.Node], inserts: dict[int, pb.Node]) -> Iterator[list[pb.Node]]:
    piece: list[pb.Node] = []
    for i, n in enumerate(nodes):
        piece.append(n)
        if i in inserts:
            yield piece
            yield [inserts[i]]
            piece = []
    if piece:
        yield piece


def set_tp(
    ets: EtSet, t: int, dims: ModelDims | None = None, model: CostModel | None = None
) -> EtSet:
    """The job with tensor-parallel degree `t` (tagged input). Raises ConfigError when the
    degree is impossible or the model sizes cannot be read."""
    t0 = tp_degree(ets)
    if t < 1 or (t0 > 1 and ets.world_size % t0):
        raise ConfigError(f"cannot change tensor parallelism {t0} -> {t}")
    dims = dims or infer_dims(ets.ranks[0].nodes)
    if dims is None:
        raise ConfigError("--tp needs the hidden size, not found in the layers")
    if (dims.heads > 1 and dims.heads % t) or (4 * dims.hidden) % t:
        raise ConfigError(f"{dims.heads} heads / FFN {4 * dims.hidden} do not split {t} ways")
    roles, groups, world = roles_by_members(ets), process_groups(ets), ets.world_size
    fit = fit_network(ets)
    replicas = world // t0
    size = dims.batch * dims.seq * dims.hidden * 4
    new_ranks: list[RankEt] = []
    mapping: dict[int, Members] = {}
    for rep in range(replicas):
        src = ets.rank(rep * t0)
        traced = int(get_attr(src.metadata, cv.META_WHATIF_SHAPES_TP, 0) or t0)
        nodes, anchors = _reshard(src, traced / t0, traced / t, dims, model)
        next_id = max((n.id for n in nodes), default=0) + 1
        for j in range(t):
            tp_group = tuple(rep * t + k for k in range(t))
            inserts = {}
            if t0 == 1 and t > 1:
                for k, a in enumerate(anchors):
                    inserts[a] = _all_reduce(nodes[a], next_id + k, size, fit.overall, t)
            out = assemble(_pieces([nd.clone(n) for n in nodes], inserts), source_procs(nodes))
            for n in out:
                if n.type != pb.COMM_COLL_NODE:
                    continue
                old = members_of(n, groups, world) if nd.attr(n, "pg_name") is not None else ()
                if not old or roles.get(old) == "tp":
                    if old:
                        link = fit.for_group(old)
                        new = link.retime(nd.comm_duration(n), ALL_REDUCE, size, len(old), t, size)
                        nd.set_duration(n, round(new))
                    mapping[id(n)] = tp_group
                else:
                    mapping[id(n)] = tuple((x // t0) * t + j for x in old)
            meta = pb.GlobalMetadata()
            meta.CopyFrom(src.metadata)
            nd.put(meta, cv.META_WHATIF_SHAPES_TP, traced, "int64_val")  # type: ignore[arg-type]
            new_ranks.append(RankEt(rep * t + j, meta, out))
    return ets.with_ranks(relabel(new_ranks, mapping))
