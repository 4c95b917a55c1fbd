"""torchtitan's selective "op" activation checkpointing: what a layer re-runs before its
backward (`layer.layer_backward` calls it under `recompute selective` on a profile with
`selective_op`)."""

from __future__ import annotations

from lumos.simulator.workload import elementwise as ew
from lumos.simulator.workload.block import Block
from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.layer import gathered_gemm


def op_recompute(blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...]) -> None:
    """torchtitan's selective "op" checkpointing re-runs, before a layer's backward, every
    op it did not save: the element-wise chain (FP8 casts included) and every second
    matmul (the parity flips each step; the mean step re-runs half of each linear).
    Attention and reduce-scatter outputs are saved."""
    T, h, tag = ctx.T, ctx.h, f"{tag}.recompute"
    ln = ew.norm(blk, ctx, f"{tag}.norm1", waits=waits)
    ew.input_casts(blk, ctx, f"{tag}.qkv", T * h, 3)
    gathered_gemm(blk, ctx, f"{tag}.qkv", (T // 2, ctx.qkv_width, h), ln, None)
    ew.qk_prep(blk, ctx, tag)
    ew.input_casts(blk, ctx, f"{tag}.proj", T * ctx.attn_out_width, 1)
    blk.compute(f"{tag}.proj", *ctx.gemm(T // 2, h, ctx.attn_out_width))
    blk.compute(f"{tag}.residual1", *ctx.mem(ctx.T_sp * h * BF16 * 3))
    ln2 = ew.norm(blk, ctx, f"{tag}.norm2")
    ew.input_casts(blk, ctx, f"{tag}.fc1", T * h, 2 if ctx.model.gated else 1)
    gathered_gemm(blk, ctx, f"{tag}.fc1", (T // 2, ctx.up_width, h), ln2, None)
    ew.activation(blk, ctx, f"{tag}.activation")
    ew.input_casts(blk, ctx, f"{tag}.fc2", T * ctx.ffn, 1)
    blk.compute(f"{tag}.fc2", *ctx.gemm(T // 2, h, ctx.ffn))
