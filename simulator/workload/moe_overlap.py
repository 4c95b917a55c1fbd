"""Megatron-Core's EP all-to-all overlap: a forward and a backward merged layer by layer.

With `overlap_moe_expert_parallel_comm` (Megatron-Bridge's `moe_a2a_overlap`, plan
`a2a_overlap`) the pipeline schedule runs each steady-state forward pass together with
the backward pass that follows it ("combined 1F1B"), one layer pair at a time, on a compute
stream and a communication stream, so that the all-to-alls of one micro-batch run while
the other micro-batch computes. The order per layer pair is Megatron-Core's
`TransformerLayerSchedulePlan.run` (megatron/core/models/common/
model_chunk_schedule_plan.py):

    comm:    combine_bwd  | dispatch_fwd -> dispatch_bwd     | combine_fwd
    compute: attn_fwd     | mlp_bwd (dgrad, wgrad) ; mlp_fwd | attn_bwd

i.e. backward's unpermute and combine-gradient all-to-all; forward's attention, router and
permute; backward's experts; forward's dispatch; backward's dispatch-gradient all-to-all;
forward's experts and combine; backward's router and attention; forward's unpermute.
Layers are paired in order (forward's first with backward's last); a pair where either
layer is dense, or a layer without a partner, runs as it would alone. The chunk's
embedding and output layers run around the pairs (forward's embedding and backward's
output first, forward's output and backward's embedding last), the multi-token-prediction
layers (`mtp`) with the output layer, unmerged.
"""

from __future__ import annotations

from lumos.simulator.workload import moe
from lumos.simulator.workload.block import Block, Frozen, Names
from lumos.simulator.workload.chunk import (
    ChunkKey,
    _embedding_bwd,
    _embedding_fwd,
    output_bwd,
    output_fwd,
)
from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.elementwise import norm
from lumos.simulator.workload.layer import (
    attn_backward,
    attn_forward,
    layer_backward,
    layer_forward,
)


def _moe(ctx: Ctx, index: int | None) -> bool:
    return index is not None and ctx.model.is_moe_layer(index)


def _pair(blk: Block, ctx: Ctx, fi: int, bi: int, f_waits: tuple[int, ...]) -> tuple[int, int, int]:
    """One forward MoE layer `fi` merged with one backward MoE layer `bi`: (forward's
    first node, forward's last node, backward's last node)."""
    ft, bt = f"layer{fi}", f"layer{bi}"
    resid = ctx.mem(ctx.T_sp * ctx.h * BF16 * 2)
    blk.compute(f"{bt}.residual2_bwd", *resid)
    if "layernorm" in ctx.plan.selective_modules:
        norm(blk, ctx, f"{bt}.norm2.recompute")
    red, b_a2a = moe.combine_bwd(blk, ctx, bt)
    f_head = len(blk.name)
    ln2 = attn_forward(blk, ctx, ft, f_waits, fi)
    perm = moe.route(blk, ctx, ft)
    b_out = moe.experts_bwd(blk, ctx, bt, b_a2a)
    f_a2a = moe.dispatch(blk, ctx, ft, perm)
    b_back = moe.dispatch_bwd(blk, ctx, bt, b_out)
    f_back = moe.combine(blk, ctx, ft, moe.experts(blk, ctx, ft, f_a2a))
    b_end = attn_backward(blk, ctx, bt, (*red, moe.route_bwd(blk, ctx, bt, b_back)), bi)
    rs = moe.finish(blk, ctx, ft, ln2, f_back)
    f_end = blk.compute(f"{ft}.residual2", *ctx.mem(ctx.T_sp * ctx.h * BF16 * 3), waits=rs)
    return f_head, f_end, b_end


def build_pair(
    ctx: Ctx, names: Names, f: ChunkKey, f_first: int, b: ChunkKey, b_first: int
) -> Frozen:
    """The merged block of forward pass `f` (layers from `f_first`) and backward pass `b`
    (layers from `b_first`). Marks: `f_head` / `b_head` (each pass's first node, what its
    pipeline receive gates), `out_f` / `out_b` (what its send waits for), `layer{i}` (the
    end of the backward's i-th layer, for the gradient buckets)."""
    blk = Block(names)
    heads: dict[str, int] = {}

    def head(key: str) -> None:
        heads.setdefault(key, len(blk.name))

    f_waits: tuple[int, ...] = ()
    f_last = b_last = -1
    if f.embedding:
        head("f_head")
        f_waits = _embedding_fwd(blk, ctx)
        f_last = blk.last_compute
    if b.output:
        head("b_head")
        output_bwd(blk, ctx, ())
        if ctx.model.mtp_layers:  # not merged with the forward: run alone
            from lumos.simulator.workload.mtp import mtp_backward

            mtp_backward(blk, ctx)
        b_last = blk.last_compute
    for i in range(max(f.layers, b.layers)):
        fi = f_first + i if i < f.layers else None
        bi = b_first + b.layers - 1 - i if i < b.layers else None
        if fi is not None and bi is not None and _moe(ctx, fi) and _moe(ctx, bi):
            head("b_head")
            f_head, f_last, b_last = _pair(blk, ctx, fi, bi, f_waits)
            heads.setdefault("f_head", f_head)
            blk.mark(f"layer{bi - b_first}", b_last)
            f_waits = ()
            continue
        if bi is not None:
            head("b_head")
            b_last = layer_backward(blk, ctx, f"layer{bi}", (), bi)
            blk.mark(f"layer{bi - b_first}", b_last)
        if fi is not None:
            head("f_head")
            f_last = layer_forward(blk, ctx, f"layer{fi}", f_waits, fi)
            f_waits = ()
    if f.output:
        head("f_head")  # a loss-only chunk's forward starts here
        if ctx.model.mtp_layers:
            from lumos.simulator.workload.mtp import mtp_forward

            mtp_forward(blk, ctx)
        f_last = output_fwd(blk, ctx)
    if b.embedding:
        head("b_head")  # an embedding-only chunk's backward starts here
        _embedding_bwd(blk, ctx)
        b_last = blk.last_compute
        blk.mark("embedding", b_last)
    if f_last < 0:  # a pass with nothing to run: a no-op layer (`chunk.noop_if_empty`)
        head("f_head")
        f_last = blk.compute("noop_layer", 0, 0, 0)
    if b_last < 0:
        head("b_head")
        b_last = blk.compute("noop_layer", 0, 0, 0)
    blk.mark("out_f", f_last)
    blk.mark("out_b", b_last)
    for key, idx in heads.items():
        blk.mark(key, idx)
    return blk.freeze()
