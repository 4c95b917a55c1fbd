"""One model chunk's forward or backward for one micro-batch, as a reusable block.

A chunk is the run of layers a (virtual) pipeline stage holds; the first chunk of the
model starts with the embedding (vocab-parallel lookup, its TP reduction), the last ends
with the final norm, the output GEMM (BF16) and the vocab-parallel cross-entropy (three
small TP all-reduces), after the multi-token-prediction layers where the model has them
(`mtp`). Under ZeRO-3 (FSDP) every layer's weights are all-gathered over
the DP group before its forward and again before its backward, prefetched one layer
ahead, and its gradients reduce-scattered after its backward, on the DP stream; an MoE
layer's routed experts are their own unit over the expert-data-parallel group
(`fsdp_moe`). Blocks
are built once per distinct (layers, embedding, output, pass) and shared by every
micro-batch and every rank that runs them; `marks` name the node that ends each layer's
backward (`layer<i>`), so gradient buckets can wait for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from lumos.simulator.network.api import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER
from lumos.simulator.workload import elementwise as ew
from lumos.simulator.workload import fsdp_moe as fm
from lumos.simulator.workload import fsdp_pp, lora
from lumos.simulator.workload import nccl_share as share
from lumos.simulator.workload import zero3_tensor as z3
from lumos.simulator.workload.block import DP, DP_STREAM, TP, TP_STREAM, Block, Frozen, Names
from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.framework import FSDP1_CAST_BYTES, FSDP1_PREDIVIDE_BYTES
from lumos.simulator.workload.layer import (
    col_backward,
    gathered_gemm,
    layer_backward,
    layer_forward,
)


@dataclass(frozen=True, slots=True)
class ChunkKey:
    """What makes two chunk blocks identical."""

    layers: int
    embedding: bool
    output: bool
    forward: bool
    defer_output_wgrad: bool = False


def _dp_size(ctx: Ctx) -> int:
    return ctx.plan.dp * ctx.plan.cp


def _fsdp_gather(blk: Block, ctx: Ctx, name: str, params: int, after: int) -> int:
    """ZeRO-3: all-gather one layer's weights (per-rank shard size) on the DP stream."""
    shard = params * BF16 // _dp_size(ctx)
    return blk.coll(f"{name}.param_all_gather", DP_STREAM, ALL_GATHER, shard, DP, after)


def _copy_out(blk: Block, ctx: Ctx, tag: str, gather: int, params: int) -> int:
    """FSDP2 copies a layer's gathered parameters (`params`) out of the all-gather buffer on
    the compute stream as the layer starts (read + write BF16); FSDP1 / Megatron use views."""
    if gather < 0 or not ctx.fw.fsdp2:
        return gather
    return blk.compute(f"{tag}.fsdp_copy_out", *ctx.mem(params * 2 * BF16), waits=(gather,))


def fsdp_layer_params(ctx: Ctx) -> tuple[int, int]:
    """(gathered, reduced) weights of one layer on one TP rank under FSDP: all of them both
    ways, or under LoRA (`lora`) the frozen weights with their adapters gathered (FSDP2's
    `fully_shard` groups every parameter of the block, trained or not) and the adapters'
    gradients alone reduced (a frozen weight has none)."""
    lp = ctx.layer_params_local()
    if not ctx.plan.lora_rank:
        return lp, lp
    adapters = lora.layer_params(ctx)
    return lp + adapters, adapters


def _reduce_bytes(ctx: Ctx) -> int:
    """Bytes per gradient element of the ZeRO-3 reduce-scatter: FP32 under FSDP2 and
    FSDP1's FP32 reduce dtype, else BF16 (`_grad_reduce`)."""
    return 4 if ctx.fw.fsdp2 or ctx.fw.fsdp1_fp32_reduce else BF16


def _grad_reduce(blk: Block, ctx: Ctx, tag: str, end: int, params: int = 0) -> None:
    """ZeRO-3: one layer's gradients (or `params` weights: the embedding, the output layer)
    reduce-scattered on the DP stream; FSDP2 first copies them into its reduce-scatter
    buffer in the FP32 reduce dtype (read BF16, write FP32)."""
    lp = params or ctx.layer_params_local()
    size = lp * BF16
    if ctx.fw.fsdp2:
        ns, _, nbytes = ctx.mem(lp * (BF16 + 4))
        end = blk.side(f"{tag}.fsdp_copy_in", DP_STREAM, ns, nbytes, (end,))
        size = lp * 4
    elif ctx.fw.fsdp1_fp32_reduce:
        end = _fsdp1_cast(blk, ctx, tag, lp, end)
        size = lp * 4
    blk.coll(f"{tag}.grad_reduce_scatter", DP_STREAM, REDUCE_SCATTER, size, DP, end)


def _fsdp1_cast(blk: Block, ctx: Ctx, tag: str, lp: int, end: int) -> int:
    """FSDP1 with an FP32 reduce dtype: the post-backward hook casts the layer's unsharded
    BF16 gradient to FP32, then pre-divides it in place (factor > 1 whenever DP > 1),
    both on the post-backward (DP) stream (`framework.FSDP1_*_BYTES`)."""
    per = FSDP1_CAST_BYTES + (FSDP1_PREDIVIDE_BYTES if _dp_size(ctx) > 1 else 0)
    ns, _, nbytes = ctx.mem(lp * per)
    return blk.side(f"{tag}.fsdp_grad_cast", DP_STREAM, ns, nbytes, (end,))


def _embedding_fwd(blk: Block, ctx: Ctx, waits: tuple[int, ...] = ()) -> tuple[int, ...]:
    T, h = ctx.T, ctx.h
    extra = 2 if ctx.model.position == "learned" else 1
    look = blk.compute("embedding", *ctx.mem(T * h * BF16 * 2 * extra), waits=waits)
    if ctx.plan.tp == 1:
        return ()
    kind = REDUCE_SCATTER if ctx.sp else ALL_REDUCE
    return (blk.coll("embedding.reduce", TP_STREAM, kind, T * h * BF16, TP, look),)


def output_fwd(blk: Block, ctx: Ctx, waits: tuple[int, ...] = (), prefix: str = "") -> int:
    """Final norm, output GEMM, vocab-parallel cross-entropy and loss (`prefix`: of the
    node names, a multi-token-prediction head's)."""
    T, h, v = ctx.T, ctx.h, ctx.vocab
    norm = blk.compute(f"{prefix}final_norm", *ctx.mem(ctx.T_sp * h * BF16 * 2), waits=waits)
    gathered_gemm(blk, ctx, f"{prefix}output", (T, v, h), norm, "bf16")
    ew.logit_softcap(blk, ctx, prefix)
    ce = ew.cross_entropy(blk, ctx, backward=False, prefix=prefix)
    last = ce
    if ctx.plan.tp > 1:
        for part in ("max", "target", "sum_exp"):
            name = f"{prefix}cross_entropy.{part}_all_reduce"
            last = blk.coll(name, TP_STREAM, ALL_REDUCE, T * 4, TP, ce)
    return blk.compute(f"{prefix}loss", *ctx.mem(T * 8), waits=(last,))


def output_bwd(
    blk: Block, ctx: Ctx, waits: tuple[int, ...], prefix: str = "", defer: bool = False
) -> tuple[int, ...]:
    """The backward of `output_fwd`; with `defer` the output layer's weight gradient is
    left to the pipeline flush (`deferred_wgrads`)."""
    ew.cross_entropy(blk, ctx, backward=True, waits=waits, prefix=prefix)
    ew.logit_softcap(blk, ctx, prefix, backward=True)
    red = col_backward(blk, ctx, f"{prefix}output", ctx.vocab, ctx.h, "bf16", wgrad=not defer)
    nbytes = ctx.T_sp * ctx.h * BF16 * 3
    blk.compute(f"{prefix}final_norm_bwd", *ctx.mem(nbytes), waits=red)
    return ()


def _embedding_bwd(blk: Block, ctx: Ctx, waits: tuple[int, ...] = ()) -> None:
    T, h = ctx.T, ctx.h
    wait = -1
    if ctx.sp:
        src = blk.last_compute
        wait = blk.coll("embedding.grad_all_gather", TP_STREAM, ALL_GATHER, ctx.act_bytes, TP, src)
    blk.compute("embedding_bwd", *ctx.mem(T * h * (BF16 + 8)), waits=(wait, *waits))


def noop_if_empty(blk: Block) -> int:
    """The block's last compute node; a zero-cost one first if it has none (a chunk with
    no decoder layer, embedding or loss: Megatron-Core builds a no-op layer there)."""
    if blk.last_compute < 0:
        blk.compute("noop_layer", 0, 0, 0)
    return blk.last_compute


def _finish(blk: Block) -> Frozen:
    blk.mark("out", noop_if_empty(blk))
    return blk.freeze()


def build_chunk(ctx: Ctx, names: Names, key: ChunkKey, first_layer: int) -> Frozen:
    """The block of one chunk pass (see module doc)."""
    if ctx.plan.zero == 3 and ctx.plan.fsdp_unit == "tensor" and _dp_size(ctx) > 1:
        return _build_tensorwise(ctx, names, key, first_layer)
    blk = Block(names)
    fsdp = ctx.plan.step_zero == 3 and _dp_size(ctx) > 1
    lp, trained = fsdp_layer_params(ctx)

    def units(i: int) -> tuple[fm.Unit, ...]:
        return fm.layer_units(ctx, first_layer + i, (lp, trained))

    emb_params = ctx.vocab * ctx.h
    waits: tuple[int, ...] = ()
    if key.forward:
        if key.embedding:
            if fsdp:
                waits = (_fsdp_gather(blk, ctx, "embedding", emb_params, -1),)
            waits = _embedding_fwd(blk, ctx) if not waits else (*waits, *_embedding_fwd(blk, ctx))
        gather = fm.gather(blk, ctx, f"layer{first_layer}", units(0), -1) if fsdp else -1
        for i in range(key.layers):
            tag = f"layer{first_layer + i}"
            start = len(blk.name)
            if fsdp and i + 1 < key.layers:
                nxt = fm.gather(blk, ctx, f"layer{first_layer + i + 1}", units(i + 1), start - 1)
            else:
                nxt = -1
            copied = _copy_out(blk, ctx, tag, gather, fm.gathered(units(i)))
            layer_forward(blk, ctx, tag, (*waits, copied), first_layer + i)
            if nxt >= 0:
                share.add_share(blk, ctx, tag, start, fm.wire(units(i + 1), (), 0))
            waits, gather = (), nxt
        if key.output:
            if fsdp:
                waits = (_fsdp_gather(blk, ctx, "output", emb_params, -1),)
            if ctx.model.mtp_layers:
                from lumos.simulator.workload.mtp import mtp_forward

                mtp_forward(blk, ctx)
            output_fwd(blk, ctx)
        return _finish(blk)
    if key.output:
        if fsdp:
            waits = (_fsdp_gather(blk, ctx, "output", emb_params, -1),)
        waits = output_bwd(blk, ctx, waits, defer=key.defer_output_wgrad)
        if ctx.plan.fsdp_under_pp:
            fsdp_pp.accumulate(blk, ctx, "output", emb_params)
        frozen = ctx.plan.lora_rank > 0  # LoRA: the output layer takes no gradient
        if fsdp and not ctx.model.tied_embeddings and not frozen:  # reduced as it is done
            _grad_reduce(blk, ctx, "output", blk.last_compute, emb_params)
        if ctx.model.mtp_layers:
            from lumos.simulator.workload.mtp import mtp_backward

            mtp_backward(blk, ctx)
    top = f"layer{first_layer + key.layers - 1}"
    gather = fm.gather(blk, ctx, top, units(key.layers - 1), blk.last_compute) if fsdp else -1
    for i in reversed(range(key.layers)):
        tag = f"layer{first_layer + i}"
        start = len(blk.name)
        # backward prefetch (FSDP's BACKWARD_PRE default, FSDP2's one-ahead prefetch):
        # the next layer's gather is issued as this layer's backward starts
        below = units(i - 1) if fsdp and i > 0 else ()
        nxt = fm.gather(blk, ctx, f"layer{first_layer + i - 1}", below, start - 1)
        copied = _copy_out(blk, ctx, tag, gather, fm.gathered(units(i)))
        end = layer_backward(blk, ctx, tag, (*waits, copied), first_layer + i)
        if fsdp:  # beside: the gather below (nxt) and the reduce-scatter above
            above = units(i + 1) if i + 1 < key.layers else ()
            share.add_share(blk, ctx, tag, start, fm.wire(below, above, _reduce_bytes(ctx)))
        waits, gather = (), nxt
        blk.mark(f"layer{i}", end)
        if fsdp and not ctx.model.moe:
            _grad_reduce(blk, ctx, tag, end, trained)
        elif fsdp:
            fm.reduce(blk, ctx, tag, units(i), end, _reduce_bytes(ctx))
        if ctx.plan.fsdp_under_pp:
            fsdp_pp.accumulate(blk, ctx, tag, fm.held(units(i)))
    if key.embedding:
        if not ctx.plan.lora_rank:  # a frozen embedding takes no gradient (LoRA)
            _embedding_bwd(blk, ctx)
        if ctx.plan.fsdp_under_pp:
            fsdp_pp.accumulate(blk, ctx, "embedding", emb_params)
        blk.mark("embedding", blk.last_compute)
        if fsdp and not ctx.plan.lora_rank:
            _grad_reduce(blk, ctx, "embedding", blk.last_compute, emb_params)
    return _finish(blk)


def _build_tensorwise(ctx: Ctx, names: Names, key: ChunkKey, first_layer: int) -> Frozen:
    """`build_chunk` under DeepSpeed-style ZeRO-3 (`zero3_tensor`): blocking per-tensor
    fetches before each layer, per-tensor gradient reduce-scatters after it."""
    blk = Block(names)
    emb = [z3.Tensor("weight", ctx.vocab * ctx.h)]
    waits: tuple[int, ...] = ()
    if key.forward:
        if key.embedding:
            w = z3.gather(blk, ctx, "embedding", emb, -1)
            waits = (*w, *_embedding_fwd(blk, ctx, w))
        for i in range(key.layers):
            tag = f"layer{first_layer + i}"
            fetched = z3.fetch_forward(blk, ctx, tag)
            layer_forward(blk, ctx, tag, (*waits, *fetched), first_layer + i)
            waits = ()
        if key.output:  # a tied weight was released after the lookup: fetched again
            output_fwd(blk, ctx, z3.gather(blk, ctx, "output", emb, blk.last_compute))
        return _finish(blk)
    if key.output:
        waits = output_bwd(blk, ctx, z3.gather(blk, ctx, "output", emb, -1))
    tensors = z3.layer_tensors(ctx)
    for i in reversed(range(key.layers)):
        tag = f"layer{first_layer + i}"
        fetched = z3.fetch_backward(blk, ctx, tag)
        end = layer_backward(blk, ctx, tag, (*waits, *fetched), first_layer + i)
        blk.mark(f"layer{i}", end)
        rs = z3.reduce(blk, ctx, tag, tensors, end)
        waits = () if ctx.plan.overlap_grad_reduce else (rs,)
    if key.embedding:
        _embedding_bwd(blk, ctx, waits)
        z3.reduce(blk, ctx, "embedding", emb, blk.last_compute)
        blk.mark("embedding", blk.last_compute)
    return _finish(blk)


def deferred_wgrads(ctx: Ctx, names: Names, count: int) -> Frozen:
    """Megatron-Core's `defer_embedding_wgrad_compute` at the pipeline flush
    (`finish_embedding_wgrad_compute`): the output layer's weight-gradient GEMM of `count`
    micro-batches, each after its input's all-gather (sequence parallelism)."""
    blk = Block(names)
    T, h, v = ctx.T, ctx.h, ctx.vocab
    for _ in range(count):
        ag = -1
        if ctx.sp:
            src = blk.last_compute
            ag = blk.coll("output.input_all_gather", TP_STREAM, ALL_GATHER, ctx.act_bytes, TP, src)
        blk.compute("output.wgrad", *ctx.gemm(v, h, T, "bf16", True), waits=(ag,))
    return _finish(blk)
