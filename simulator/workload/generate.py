"""Per-rank graphs of one training step from a model spec, a plan and the kernel model.

Only distinct ranks are generated: tensor-parallel peers and data-parallel replicas run
the same graph (Megatron's ranks are symmetric), so one rank per (pipeline stage, CP
rank) stands for all — `rep[rank]` names it. Each carries the full process groups, so
the network model prices every collective over its real members and placement.

A stage's graph: [ZeRO-1 parameter all-gathers, overlapped with the first forwards] →
the pipeline order (`schedule.stage_order`), each pass preceded by its receive and
followed by its send on the PP streams → gradient buckets reduce-scattered (ZeRO-1) or
all-reduced (ZeRO-0) on the DP stream once their layers' last backward is done (at the
end without `overlap_grad_reduce`) → tied-embedding gradient all-reduce between the
first and last stage (also the embedding copy the multi-token-prediction layers read) →
optimizer step on this rank's shard → [parameter all-gather
without `overlap_param_gather`]. A mixture-of-experts model's expert weights sit in their
own buckets (Megatron's expert-parallel gradient buffers), reduced and gathered over the
expert-data-parallel group (`plan.Layout.expert_dp_group`) instead of the DP group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lumos.errors import ConfigError
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.graph import RankGraph
from lumos.simulator.network.api import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER
from lumos.simulator.workload import fp8_params, fsdp_moe, fsdp_pp, lora
from lumos.simulator.workload.assemble import Pieces
from lumos.simulator.workload.block import (
    DP,
    DP_STREAM,
    EDP,
    EMB,
    PP_RECV,
    PP_SEND,
    Block,
    Frozen,
    Names,
)
from lumos.simulator.workload.chunk import ChunkKey, build_chunk, deferred_wgrads
from lumos.simulator.workload.cp_torch import CP_NEXT, CP_PREV
from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.layout import Coords, Layout
from lumos.simulator.workload.plan import ParallelPlan, Recompute
from lumos.simulator.workload.schedule import Step, stage_order, units
from lumos.simulator.workload.spec import ModelSpec

OPTIMIZER_BYTES_PER_PARAM = (
    32  # Adam: fp32 master, m, v, grad read + master, m, v, bf16 param written
)


@dataclass(slots=True)
class GeneratedStep:
    """The distinct ranks' graphs, who stands for whom, and per-node work for ETs."""

    graphs: list[RankGraph]
    rep: dict[int, int]
    flops: dict[int, np.ndarray] = field(default_factory=dict)
    nbytes: dict[int, np.ndarray] = field(default_factory=dict)
    orders: dict[int, list[Step]] = field(default_factory=dict)


def _add_last(params: list[int], extra: int) -> list[int]:
    """`params` with `extra` weights added to its last layer (a chunk with no decoder
    layer: one entry of its own, which its gradient bucket marks by the pass's end)."""
    return [*params[:-1], params[-1] + extra] if params else [extra]


class Generator:
    """Builds the distinct ranks of one step (see module doc)."""

    def __init__(self, model: ModelSpec, plan: ParallelPlan, km: KernelModel) -> None:
        plan.check(model)
        if plan.recompute is Recompute.AUTO:  # a request: `estimate` resolves it first
            raise ConfigError(
                "plan: recompute 'auto' is resolved before generating "
                "(autorecompute.choose_recompute; estimate() does it)"
            )
        self.model, self.plan = model, plan
        self.ctx = Ctx.make(model, plan, km)
        self.layout = Layout(plan)
        self.names = Names()
        chunks = plan.pp * plan.vp
        self.chunk_layers = plan.chunk_layers(model)  # uneven splits: `pipesplit`
        self.first_layer = [sum(self.chunk_layers[:v]) for v in range(chunks)]
        self._blocks: dict[tuple[int, bool, bool], Frozen] = {}
        self._small: dict[tuple[object, ...], Frozen] = {}
        self._pairs: dict[tuple[int, int], Frozen] = {}

    def vstage(self, stage: int, chunk: int) -> int:
        return chunk * self.plan.pp + stage

    def block(self, stage: int, chunk: int, forward: bool, defer: bool = False) -> Frozen:
        """The (shared) block of one pass of chunk `chunk` on `stage` (`defer`: the last
        chunk's backward without the output layer's weight gradient)."""
        v = self.vstage(stage, chunk)
        key = (v, forward, defer)
        if key not in self._blocks:
            last = self.plan.pp * self.plan.vp - 1
            ck = ChunkKey(self.chunk_layers[v], v == 0, v == last, forward, defer)
            self._blocks[key] = build_chunk(self.ctx, self.names, ck, self.first_layer[v])
        return self._blocks[key]

    def pair_block(self, stage: int, f_chunk: int, b_chunk: int) -> Frozen:
        """The (shared) merged block of a forward of `f_chunk` and a backward of `b_chunk`
        (`plan.a2a_overlap`, `moe_overlap`)."""
        from lumos.simulator.workload.moe_overlap import build_pair

        vf, vb = self.vstage(stage, f_chunk), self.vstage(stage, b_chunk)
        if (vf, vb) not in self._pairs:
            last = self.plan.pp * self.plan.vp - 1
            fk = ChunkKey(self.chunk_layers[vf], vf == 0, vf == last, True)
            bk = ChunkKey(self.chunk_layers[vb], vb == 0, vb == last, False)
            pair = build_pair(
                self.ctx, self.names, fk, self.first_layer[vf], bk, self.first_layer[vb]
            )
            self._pairs[(vf, vb)] = pair
        return self._pairs[(vf, vb)]

    def _dense_layer_params(self, index: int) -> int:
        """Weights of layer `index` on one TP rank outside its routed experts."""
        return fsdp_moe.dense_layer_params(self.ctx, index)

    def expert_params(self, v: int) -> list[int]:
        """Routed-expert weights per layer of virtual stage `v` on one rank (the
        `experts / ep` local experts, each split over expert TP)."""
        m, local = self.model, fsdp_moe.local_experts(self.ctx)
        first = self.first_layer[v]
        out = [local if m.is_moe_layer(first + i) else 0 for i in range(self.chunk_layers[v])]
        if v == len(self.chunk_layers) - 1 and m.mtp_layers and m.is_moe_layer(m.layers):
            out = _add_last(out, m.mtp_layers * local)  # the MTP layers' experts
        return out

    def chunk_params(self, v: int) -> list[int]:
        """Local weights per layer of virtual stage `v` (embedding/output added at the ends),
        routed experts excepted (`expert_params`)."""
        out = self._linear_params(v, experts=False)
        emb = self.ctx.vocab * self.ctx.h
        if v == 0:
            out = [out[0] + emb, *out[1:]] if out else [emb]
        if v == len(self.chunk_layers) - 1 and not (self.model.tied_embeddings and v == 0):
            out = _add_last(out, 0 if self.model.tied_embeddings and self.plan.pp == 1 else emb)
        if v == len(self.chunk_layers) - 1 and self.model.mtp_layers:
            mtp = self._mtp_params(emb if v > 0 and not self.model.tied_embeddings else 0)
            out = _add_last(out, mtp)
        return out

    def trained_params(self, v: int) -> list[int]:
        """The trained weights per layer index of `chunk_params(v)`: all of them, or under
        LoRA the adapters alone (`lora`; the frozen embedding and output layer none)."""
        if not self.plan.lora_rank:
            return self.chunk_params(v)
        return [lora.layer_params(self.ctx)] * self.chunk_layers[v] or [0]

    def _mtp_params(self, embedding: int) -> int:
        """Local multi-token-prediction weights outside routed experts (`mtp`), plus the
        last stage's `embedding` copy they read (pipelined, untied)."""
        m, t = self.model, self.plan.tp
        layer = self._dense_layer_params(m.layers)
        extra = 2 * m.hidden * m.hidden // t + 3 * m.hidden
        return m.mtp_layers * (layer + extra) + embedding

    def buckets(self, v: int, experts: bool = False) -> list[tuple[int, int]]:
        """(last layer index in the chunk, params) per gradient bucket, backward order;
        `experts`: the buckets of the routed-expert weights (none for a dense model)."""
        dp = self.plan.expert_dp if experts else self.plan.dp * self.plan.cp
        size = max(40_000_000, 1_000_000 * dp)
        out, acc = [], 0
        params = self.expert_params(v) if experts else self.trained_params(v)
        if experts and not any(params):
            return []
        for i in reversed(range(len(params))):
            acc += params[i]
            if acc >= size or i == 0:
                out.append((i, acc))
                acc = 0
        return out

    def _pp_peer(self, c: Coords, delta: int) -> int:
        return self.layout.rank(c.tp, c.cp, (c.stage + delta) % self.plan.pp, c.dp)

    def rank_graph(
        self, stage: int, cp: int
    ) -> tuple[RankGraph, np.ndarray, np.ndarray, list[Step]]:
        """The graph of rank (tp 0, `cp`, `stage`, dp 0) and its per-node FLOPs and bytes."""
        plan, ctx = self.plan, self.ctx
        c = Coords(0, cp, stage, 0)
        rank = self.layout.rank(0, cp, stage, 0)
        order = stage_order(plan.pp, plan.vp, plan.microbatches, stage)
        pieces = Pieces()
        dp_size = plan.dp * plan.cp
        zero1 = plan.step_zero == 1 and dp_size > 1
        gathers: dict[int, list[int]] = {}
        if zero1 and plan.overlap_param_gather:
            for chunk in range(plan.vp):
                gathers[chunk] = self._param_gathers(pieces, self.vstage(stage, chunk))
        last_bwd = {st.chunk: pos for pos, st in enumerate(order) if not st.forward}
        first_fwd = {}
        for pos, st in enumerate(order):
            if st.forward and st.chunk not in first_fwd:
                first_fwd[st.chunk] = pos
        reduces: list[int] = []
        grads: list[tuple[int, int, int, bool]] = []  # (block start, mark, params, experts)
        lv = plan.pp * plan.vp - 1
        deferred = 0  # output-layer weight gradients left to the flush (last stage)
        held: list[tuple[int, int, int, bool]] = []  # their bucket, reduced after them
        for unit in units(order, plan.pp, plan.a2a_overlap):
            if len(unit) == 2:  # Megatron-Core's combined 1F1B: a forward and a backward merged
                (st, f_pos), (nxt, b_pos) = unit
                passes = [(st, f_pos, "f_head", "out_f"), (nxt, b_pos, "b_head", "out_b")]
                blk = self.pair_block(stage, st.chunk, nxt.chunk)
            else:
                ((st, pos),) = unit
                passes = [(st, pos, "", "out")]
                last_v = not st.forward and self.vstage(stage, st.chunk) == lv
                defer = last_v and deferred < plan.defer_embedding_wgrad
                deferred += defer
                blk = self.block(stage, st.chunk, st.forward, defer)
            recvs: dict[str, list[int]] = {}
            for p_st, p_pos, head, _ in passes:
                v = self.vstage(stage, p_st.chunk)
                waits = (
                    list(gathers.get(p_st.chunk, [])) if p_pos == first_fwd.get(p_st.chunk) else []
                )
                if (v > 0) if p_st.forward else (v < lv):
                    waits.append(self._p2p(pieces, c, p_st, v, send=False))
                recvs[head] = waits
            start = pieces.add(blk, first_waits=recvs.pop("", []))
            for head, waits in recvs.items():
                pieces.extra.extend((start + blk.marks[head], w) for w in waits)
            for p_st, p_pos, _, out_key in passes:
                self._after_pass(pieces, c, (p_st, p_pos), (start, blk, out_key), last_bwd, grads)
                if (
                    deferred
                    and grads
                    and plan.overlap_grad_reduce
                    and not p_st.forward
                    and self.vstage(stage, p_st.chunk) == lv
                ):
                    held.append(grads.pop(0))  # the output layer's bucket waits for the flush
                if plan.overlap_grad_reduce:
                    reduces += [self._grad_reduce(pieces, s + m, p, e) for s, m, p, e in grads]
                    grads.clear()
        end = pieces.last_compute()
        if deferred:  # Megatron-Core's finish_embedding_wgrad_compute, before the reductions
            pieces.add(deferred_wgrads(ctx, self.names, deferred), first_waits=[end])
            end = pieces.last_compute()
            grads = held + grads
        reduces += [self._grad_reduce(pieces, end, p, e) for _, _, p, e in grads]
        shared = self.model.tied_embeddings or self.model.mtp_layers > 0
        if shared and plan.pp > 1 and stage in (0, plan.pp - 1) and not plan.lora_rank:
            emb = Block(self.names)
            size = ctx.vocab * ctx.h * BF16
            emb.coll("embedding.grad_all_reduce", DP_STREAM, ALL_REDUCE, size, EMB, -1)
            reduces.append(pieces.add(emb.freeze(), first_waits=[end]))
        self._optimizer(pieces, stage, reduces)
        if zero1 and not plan.overlap_param_gather:
            for chunk in range(plan.vp):
                self._param_gathers(pieces, self.vstage(stage, chunk), pieces.last_compute())
        groups = [
            self.layout.tp_group(c),
            self.layout.cp_group(c),
            self.layout.dp_group(c),
            self.layout.embedding_group(c),
            self.layout.ep_group(c),
            self.layout.expert_dp_group(c),
        ]
        peers = {CP_NEXT: self.layout.rank(0, (cp + 1) % plan.cp, stage, 0)}
        peers[CP_PREV] = self.layout.rank(0, (cp - 1) % plan.cp, stage, 0)
        g, flops, nbytes = pieces.finish(rank, self.names.as_list(), groups, peers)
        g.world_size = plan.world
        return g, flops, nbytes, order

    def _after_pass(
        self,
        pieces: Pieces,
        c: Coords,
        step: tuple[Step, int],
        added: tuple[int, Frozen, str],
        last_bwd: dict[int, int],
        grads: list[tuple[int, int, int, bool]],
    ) -> None:
        """A pass's pipeline send and, after a chunk's last backward, its gradient buckets."""
        (st, pos), (start, blk, out_key) = step, added
        v = self.vstage(c.stage, st.chunk)
        if (v < self.plan.pp * self.plan.vp - 1) if st.forward else (v > 0):
            self._p2p(pieces, c, st, v, send=True, after=start + blk.marks[out_key])
        if not st.forward and pos == last_bwd[st.chunk] and self.plan.step_zero in (0, 1):
            for experts in (False, True):
                for layer, params in self.buckets(v, experts):
                    # a chunk without decoder layers: its weights are ready at the pass's
                    # end; FSDP2 in a pipeline reduces every block after the pass (fsdp_pp)
                    mark = blk.marks[out_key]
                    if not self.plan.fsdp_under_pp:
                        mark = blk.marks.get(f"layer{layer}", mark)
                    grads.append((start, mark, params, experts))

    def _p2p(self, pieces: Pieces, c: Coords, st: Step, v: int, send: bool, after: int = -1) -> int:
        toward_next = st.forward == send
        peer = self._pp_peer(c, 1 if toward_next else -1)
        recv_v = v + (1 if st.forward else -1) if send else v
        tag = 2 * recv_v + (0 if st.forward else 1)
        key = ("p2p", send, st.forward, peer, tag)
        if key not in self._small:
            blk = Block(self.names)
            name = ("send_" if send else "recv_") + ("activation" if st.forward else "gradient")
            stream = PP_SEND if send else PP_RECV
            blk.p2p(name, send, stream, self.ctx.pp_bytes, peer, tag, -1)
            self._small[key] = blk.freeze()
        return pieces.add(self._small[key], first_waits=[after] if after >= 0 else [])

    def _grad_reduce(self, pieces: Pieces, after: int, params: int, experts: bool = False) -> int:
        group, pre = (EDP, "expert_") if experts else (DP, "")
        if self.plan.fsdp_under_pp:
            red = fsdp_pp.reduce(self.names, self.ctx, params, group, pre + "grad_reduce_scatter")
            return pieces.add(red, first_waits=[after])
        blk = Block(self.names)
        if self.plan.step_zero == 1:
            kind, name = REDUCE_SCATTER, "grad_reduce_scatter"
        else:
            kind, name = ALL_REDUCE, "grad_all_reduce"
        blk.coll(pre + name, DP_STREAM, kind, params * BF16, group, -1)
        return pieces.add(blk.freeze(), first_waits=[after])

    def _linear_params(self, v: int, experts: bool) -> list[int]:
        """The weights per layer index of `chunk_params(v)` (or `expert_params`) that are
        linear layers' (FP8 under `fp8_param_gather`): the decoder layers' own, not the
        embedding / output layer added at the chunk's ends."""
        if experts:
            return self.expert_params(v)
        first = self.first_layer[v]
        return [self._dense_layer_params(first + i) for i in range(self.chunk_layers[v])]

    def _param_gathers(self, pieces: Pieces, v: int, after: int = -1) -> list[int]:
        out = []
        for experts in (False, True):
            dp_size = self.plan.expert_dp if experts else self.plan.dp * self.plan.cp
            group, name = (EDP, "expert_param_all_gather") if experts else (DP, "param_all_gather")
            params = self.expert_params(v) if experts else self.trained_params(v)
            sizes = fp8_params.gather_bytes(
                self.buckets(v, experts),
                params,
                self._linear_params(v, experts),
                self.plan.fp8_param_gather and not self.plan.lora_rank,  # adapters: BF16
            )
            for nbytes in reversed(sizes):
                blk = Block(self.names)
                blk.coll(name, DP_STREAM, ALL_GATHER, nbytes // dp_size, group, -1)
                out.append(pieces.add(blk.freeze(), first_waits=[after] if after >= 0 else []))
        return out

    def _optimizer(self, pieces: Pieces, stage: int, waits: list[int]) -> None:
        vs = [self.vstage(stage, ch) for ch in range(self.plan.vp)]
        dp, edp = (self.plan.dp * self.plan.cp, self.plan.expert_dp) if self.plan.zero else (1, 1)
        total = sum(sum(self.trained_params(v)) for v in vs)
        experts = sum(sum(self.expert_params(v)) for v in vs)
        shard = total // dp + experts // edp
        nbytes = shard * OPTIMIZER_BYTES_PER_PARAM
        if self.plan.fp8_param_gather and not self.plan.lora_rank:  # FP32 main -> FP8
            linear = sum(sum(self._linear_params(v, False)) for v in vs) // dp + experts // edp
            nbytes += linear * fp8_params.QUANTIZE_EXTRA_BYTES
        blk = Block(self.names)
        blk.compute("optimizer_step", *self.ctx.mem(nbytes))
        pieces.add(blk.freeze(), first_waits=waits)

    def step(self) -> GeneratedStep:
        """Graphs of every distinct rank and the representative of every rank."""
        out = GeneratedStep([], {})
        for stage in range(self.plan.pp):
            for cp in range(self.plan.cp):
                g, flops, nbytes, order = self.rank_graph(stage, cp)
                out.graphs.append(g)
                out.flops[g.rank], out.nbytes[g.rank], out.orders[g.rank] = flops, nbytes, order
        lay = self.layout
        for r in range(self.plan.world):
            c = lay.coords(r)
            out.rep[r] = lay.rank(0, c.cp, c.stage, 0)
        return out
