"""Edit: cut a trace without a pipeline into `pp` stages and schedule micro-batches.

Each data-parallel replica's rank (one rank per replica: tensor parallelism is not
re-staged) becomes `pp` ranks, `replica·pp + stage`. The layer stack is split evenly over
the `pp·vp` virtual stages (`schedule.chunk_layers`); the embedding (forward nodes before
the stack, backward after it) goes to the first, the head and loss to the last. Every
forward/backward piece is re-timed for a micro-batch of `B / microbatches` (`reshape`
with a leading-dimension batch map), then emitted per stage in the schedule's order
(`schedule.stage_order`) with a send/recv pair between consecutive virtual stages (the
activation `B/M x S x H`, float32 as traced) timed by the trace's fitted network. A
layer's gradient collectives are issued once, with its last micro-batch's backward, and
so is the host work that prepares and issues them (the calls `_SYNC` names and every op
inside them: DDP's bucket copies and gradient division, `c10d::allreduce_`; and the
backward's tail after the layers from its first op that waits on a collective: DDP's
finalisation, which waits for the buckets and copies them back into the gradients), as
gradients accumulate over the micro-batches and are synchronised once per step; the
optimizer updates a stage's own layers (the embedding's on the first stage, the head's on
the last). With one data-parallel replica (no data-parallel group left, e.g. after
`--dp 1`) a pipeline framework's step has no gradient sync at all: the gradient
collectives, the host work above and the data-parallel wrapper's own forward work
(`DistributedDataParallel.forward`) are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import make_attr
from lumos.errors import ConfigError
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.assemble import assemble, source_procs
from lumos.simulator.whatif.dims import ModelDims, batch_map, infer_dims
from lumos.simulator.whatif.etset import EtSet, RankEt, process_groups
from lumos.simulator.whatif.groups import Members, members_of, relabel, roles_by_members
from lumos.simulator.whatif.netfit import LinkFit, fit_network
from lumos.simulator.whatif.reshape import reshape_rank
from lumos.simulator.whatif.schedule import Pass, chunk_layers, stage_order
from lumos.simulator.whatif.segments import Key, Segments, segment

BYTES_PER_ACT = 4
#: host calls that synchronise gradients across replicas (their span is that work)
_SYNC = re.compile(r"c10d::|reducer::|record_param_comms|allreduce|all_reduce|reduce_scatter")
#: a data-parallel wrapper's own forward work (what runs in its module call, not its children)
_DP_WRAPPER = re.compile(r"^(DistributedDataParallel|FullyShardedDataParallel)\.forward$")


def sync_work(r: RankEt) -> set[int]:
    """Positions of the backward's gradient-synchronisation host work on each thread:
    every `_SYNC` call (all its segments, matched by `rf_id` within a layer: copies of a
    layer repeat its ids) and what runs between them,
    and the backward's tail after the layers from its first op that waits on a collective.
    """
    colls = {n.id for n in r.nodes if n.type == pb.COMM_COLL_NODE}
    spans: dict[tuple[nd.Proc, int, str, int], list[int]] = {}
    threads: dict[nd.Proc, list[int]] = {}
    seen_layer: set[nd.Proc] = set()
    out: set[int] = set()
    tail: set[nd.Proc] = set()
    for i, n in enumerate(r.nodes):
        proc = nd.processor(n)
        if nd.on_gpu(n) or nd.is_comm(n) or proc[0] != "tid":
            continue
        pos = threads.setdefault(proc, [])
        pos.append(i)
        phase, layer, _ = nd.tags(n)
        if phase != "bwd":
            continue
        if layer >= 0:
            seen_layer.add(proc)
        elif proc in seen_layer and any(d in colls for d in nd.deps(n)):
            tail.add(proc)
        if proc in tail:
            out.add(i)
        rf = nd.int_attr(n, "rf_id")
        if rf >= 0 and _SYNC.search(n.name):
            spans.setdefault((proc, rf, n.name, layer), []).append(len(pos) - 1)
    for (proc, *_), at in spans.items():
        out.update(threads[proc][at[0] : at[-1] + 1])
    return out


class _Stage:
    """Emits one stage's pieces from the full-batch and micro-batch copies of a rank."""

    def __init__(self, full: RankEt, micro: RankEt, seg: Segments, plan: _Plan, stage: int) -> None:
        self.full, self.micro, self.seg, self.plan, self.stage = full, micro, seg, plan, stage
        self.main = _main_thread(full)
        self.next_id = max((n.id for n in full.nodes), default=0) + 1
        self.sync = sync_work(full) | plan.gradient_collectives(full)
        self.wrapper = (
            {i for i, n in enumerate(full.nodes) if _DP_WRAPPER.search(n.name)}
            if plan.unreplicated
            else set()
        )

    def _piece(self, key: Key, mb: int, keep_sync: bool) -> list[pb.Node]:
        """A piece for micro-batch `mb`; the gradient sync only if `keep_sync` and the
        pipeline has replicas to synchronise with."""
        keep_sync = keep_sync and not self.plan.unreplicated
        out = []
        for i in self.seg.pieces.get(key, []):
            if (not keep_sync and i in self.sync) or i in self.wrapper:
                continue
            c = nd.clone(self.micro.nodes[i])
            phase, layer, _ = nd.tags(c)
            nd.set_tags(c, phase, layer, mb)
            out.append(c)
        return out

    def _p2p(self, send: bool, peer_v: int, tag: int, mb: int) -> list[pb.Node]:
        plan = self.plan
        peer = plan.rank_of(peer_v % plan.pp, self.replica)
        n = pb.Node(id=self.next_id, name="whatif:send" if send else "whatif:recv")
        self.next_id += 1
        n.type = pb.COMM_SEND_NODE if send else pb.COMM_RECV_NODE
        me = plan.rank_of(self.stage, self.replica)
        src, dst = (me, peer) if send else (peer, me)
        dur = round(plan.link.time_ns(-1, plan.act_bytes, 2))
        n.attr.extend(
            [
                make_attr("comm_src", src),
                make_attr("comm_dst", dst),
                make_attr("comm_tag", tag),
                make_attr("comm_size", plan.act_bytes),
                make_attr(cv.TID, self.main),
            ]
        )
        nd.set_duration(n, dur)
        nd.set_tags(n, "fwd" if tag % 2 == 0 else "bwd", -1, mb)
        return [n]

    def passes(self, order: list[Pass], replica: int) -> Iterator[list[pb.Node]]:
        self.replica = replica
        plan, seg = self.plan, self.seg
        last_v = plan.pp * plan.vp - 1
        for p in order:
            v = p.chunk * plan.pp + self.stage
            layers = plan.chunks[v]
            tag_f, tag_b = (
                2 * (p.microbatch * (last_v + 1) + v),
                2 * (p.microbatch * (last_v + 1) + v) + 1,
            )
            if p.kind == "F":
                if v > 0:
                    yield self._p2p(False, v - 1, tag_f - 2, p.microbatch)
                if v == 0:
                    yield self._piece(("fwd", -1, 0), p.microbatch, True)
                for k in layers:
                    yield self._piece(("fwd", k, 0), p.microbatch, True)
                if v == last_v:
                    yield self._piece(("fwd", -1, 1), p.microbatch, True)
                else:
                    yield self._p2p(True, v + 1, tag_f, p.microbatch)
            else:
                final = p.microbatch == plan.microbatches - 1
                if v < last_v:
                    yield self._p2p(False, v + 1, tag_b + 2, p.microbatch)
                else:
                    yield self._piece(("bwd", -1, 0), p.microbatch, final)
                for k in reversed(layers):
                    yield self._piece(("bwd", k, 0), p.microbatch, final)
                if v == 0:
                    yield self._piece(("bwd", -1, 1), p.microbatch, final)
                else:
                    yield self._p2p(True, v - 1, tag_b, p.microbatch)
        owned = [k for c in range(plan.vp) for k in plan.chunks[c * plan.pp + self.stage]]
        for key in seg.order:
            phase, layer, part = key
            if phase in ("fwd", "bwd"):
                continue
            if (
                phase != "optim"
                or layer in owned
                or (layer < 0 and _edge(part, self.stage, plan.pp))
            ):
                yield [nd.clone(self.full.nodes[i]) for i in seg.pieces[key]]


def _edge(part: int, stage: int, pp: int) -> bool:
    return (part == 0 and stage == 0) or (part == 1 and stage == pp - 1)


def _main_thread(r: RankEt) -> int:
    counts: dict[int, int] = {}
    for n in r.nodes:
        tid = nd.int_attr(n, cv.TID)
        if tid >= 0 and nd.attr(n, "is_cpu_op", False):
            counts[tid] = counts.get(tid, 0) + 1
    return max(counts, key=lambda t: counts[t]) if counts else 0


class _Plan:
    def __init__(
        self, pp: int, vp: int, microbatches: int, layers: int, link: LinkFit, act: int
    ) -> None:
        self.pp, self.vp, self.microbatches = pp, vp, microbatches
        self.chunks = chunk_layers(layers, pp, vp)
        self.link, self.act_bytes = link, act
        self.grad_groups: set[Members] = set()
        self.groups: dict[str, Members] = {}
        self.world = 1
        #: one data-parallel replica: no gradient sync, no data-parallel wrapper
        self.unreplicated = False

    def know_groups(self, ets: EtSet) -> None:
        """Which groups carry gradients: the data-parallel ones (none after `--dp 1`)."""
        self.groups, self.world = process_groups(ets), ets.world_size
        self.grad_groups = {m for m, role in roles_by_members(ets).items() if role == "dp"}
        self.unreplicated = not self.grad_groups

    def gradient_collectives(self, r: RankEt) -> set[int]:
        """Positions of the rank's gradient collectives: on a data-parallel group, or on
        a group of one (a replica of one) in backward or optimizer."""
        out = set()
        for i, n in enumerate(r.nodes):
            if n.type != pb.COMM_COLL_NODE:
                continue
            members = members_of(n, self.groups, self.world)
            if members in self.grad_groups or (
                len(members) == 1 and nd.tags(n)[0] in ("bwd", "optim")
            ):
                out.add(i)
        return out

    def rank_of(self, stage: int, replica: int) -> int:
        return replica * self.pp + stage


def set_pp(
    ets: EtSet,
    pp: int,
    schedule: str = "1f1b",
    vp: int = 1,
    microbatches: int | None = None,
    dims: ModelDims | None = None,
) -> EtSet:
    """The job with `pp` pipeline stages per replica (tagged input, no pipeline yet).

    Raises ConfigError when the trace already has send/recv, its sizes or layers cannot be
    read, or the schedule is impossible.
    """
    if any(n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE) for r in ets.ranks for n in r.nodes):
        raise ConfigError(
            "the trace already has a pipeline (send/recv); re-staging it is not supported"
        )
    dims = dims or infer_dims(ets.ranks[0].nodes)
    if dims is None:
        raise ConfigError("--pp needs the batch/sequence/hidden sizes, not found in the layers")
    m = microbatches or pp
    if dims.batch % m:
        raise ConfigError(f"batch {dims.batch} does not split into {m} micro-batches")
    segs = {r.rank: segment(r) for r in ets.ranks}
    layers = segs[ets.ranks[0].rank].layers
    orders = stage_order(pp, m, schedule, vp)
    act = dims.batch // m * dims.seq * dims.hidden * BYTES_PER_ACT
    plan = _Plan(
        pp, vp if schedule == "interleaved" else 1, m, layers, fit_network(ets).overall, act
    )
    plan.know_groups(ets)
    groups, world = process_groups(ets), ets.world_size
    bmap = batch_map(dims, dims.batch // m)
    new_ranks: list[RankEt] = []
    mapping: dict[int, Members] = {}
    for r in ets.ranks:
        micro = reshape_rank(r, bmap)
        procs = source_procs(r.nodes)
        for s in range(pp):
            stage = _Stage(r, micro, segs[r.rank], plan, s)
            nodes = assemble(stage.passes(orders[s], r.rank), procs)
            for n in nodes:
                if n.type == pb.COMM_COLL_NODE:
                    old = members_of(n, groups, world)
                    mapping[id(n)] = tuple(plan.rank_of(s, k) for k in old)
            meta = pb.GlobalMetadata()
            meta.CopyFrom(r.metadata)
            new_ranks.append(RankEt(plan.rank_of(s, r.rank), meta, nodes))
    return ets.with_ranks(relabel(new_ranks, mapping))
