"""Multi-token prediction (DeepSeek-V3; Megatron-Core `MultiTokenPredictionBlock`,
`mtp_num_layers`) on the last pipeline stage, forward and backward.

Megatron-Core places the MTP layers on the last stage, after the decoder. MTP layer k
(0-based) on one TP rank: the vocab-parallel embedding of the input tokens shifted by
k + 1 (the model's embedding weights; on the last stage of a pipeline a copy whose
gradient is all-reduced with the first stage's, as for tied embeddings) and its TP
reduction → RMSNorm of it (`enorm`) and of the previous hidden state (`hnorm`, the
decoder's output for k = 0) → their concatenation [T_sp, 2h] → `eh_proj`, a
column-parallel [2h → h] linear (SP all-gather of its input, then an all-gather of its
output's last dimension over TP: `all_gather_last_dim_from_tensor_parallel_region`, and
the rank keeps its sequence shard) → one transformer layer (index `layers` + k, so an MoE
layer where the model's later layers are) → final norm, the shared output layer and a
vocab-parallel cross-entropy, as the model's own head (`chunk.output_fwd`). The backward
runs after the main head's backward and before the last decoder layer's: each MTP
layer's loss backward, layer backward, `eh_proj` backward (its output gradient
reduce-scattered over TP first), the concatenation's split, both norms' backward and the
embedding's gradient.
"""

from __future__ import annotations

from lumos.simulator.network.api import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER
from lumos.simulator.workload import elementwise as ew
from lumos.simulator.workload.block import TP, TP_STREAM, Block
from lumos.simulator.workload.chunk import output_bwd, output_fwd
from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.layer import (
    col_backward,
    gathered_gemm,
    layer_backward,
    layer_forward,
)


def _embedding(blk: Block, ctx: Ctx, tag: str) -> tuple[int, ...]:
    """The shifted tokens' lookup and its TP reduction (as the model's embedding)."""
    T, h = ctx.T, ctx.h
    look = blk.compute(f"{tag}.embedding", *ctx.mem(T * h * BF16 * 2))
    if ctx.plan.tp == 1:
        return (look,)
    kind = REDUCE_SCATTER if ctx.sp else ALL_REDUCE
    return (blk.coll(f"{tag}.embedding.reduce", TP_STREAM, kind, T * h * BF16, TP, look),)


def mtp_forward(blk: Block, ctx: Ctx) -> None:
    """Append every MTP layer's forward, loss included (module doc)."""
    T, h, t = ctx.T, ctx.h, ctx.plan.tp
    hidden = blk.last_compute
    for k in range(ctx.model.mtp_layers):
        tag = f"mtp{k}"
        emb = _embedding(blk, ctx, tag)
        ew.norm(blk, ctx, f"{tag}.enorm", waits=emb)
        ew.norm(blk, ctx, f"{tag}.hnorm", waits=(hidden,))
        cat = blk.compute(f"{tag}.concat", *ctx.mem(ctx.T_sp * 2 * h * BF16 * 2))
        name = f"{tag}.eh_proj"
        proj = gathered_gemm(
            blk, ctx, name, (T, h // t, 2 * h), cat, None, gather=2 * ctx.act_bytes
        )
        waits: tuple[int, ...] = ()
        if t > 1:
            size = T * (h // t) * BF16
            waits = (blk.coll(f"{name}.output_all_gather", TP_STREAM, ALL_GATHER, size, TP, proj),)
        layer_forward(blk, ctx, f"{tag}.layer", waits, ctx.model.layers + k)
        hidden = blk.last_compute  # what the next MTP layer reads
        output_fwd(blk, ctx, prefix=f"{tag}.")


def mtp_backward(blk: Block, ctx: Ctx) -> None:
    """Append every MTP layer's backward, the last layer first (module doc)."""
    T, h, t = ctx.T, ctx.h, ctx.plan.tp
    for k in reversed(range(ctx.model.mtp_layers)):
        tag = f"mtp{k}"
        output_bwd(blk, ctx, (), prefix=f"{tag}.")
        layer_backward(blk, ctx, f"{tag}.layer", (), ctx.model.layers + k)
        name = f"{tag}.eh_proj"
        waits: tuple[int, ...] = ()
        if t > 1:
            src = blk.last_compute
            rs = blk.coll(
                f"{name}.output_grad_reduce_scatter",
                TP_STREAM,
                REDUCE_SCATTER,
                T * h * BF16,
                TP,
                src,
            )
            waits = (rs,)
        red = col_backward(blk, ctx, name, h // t, 2 * h, gather=2 * ctx.act_bytes, waits=waits)
        split = ctx.mem(ctx.T_sp * 2 * h * BF16 * 2)
        blk.compute(f"{tag}.concat_bwd", *split, waits=red)
        ew.norm(blk, ctx, f"{tag}.hnorm_bwd", backward=True)
        ew.norm(blk, ctx, f"{tag}.enorm_bwd", backward=True)
        wait = -1
        if ctx.sp:
            src = blk.last_compute
            wait = blk.coll(
                f"{tag}.embedding.grad_all_gather", TP_STREAM, ALL_GATHER, ctx.act_bytes, TP, src
            )
        blk.compute(f"{tag}.embedding_bwd", *ctx.mem(T * h * (BF16 + 8)), waits=(wait,))
