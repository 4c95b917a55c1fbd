"""The layers of a hybrid Mamba-2 / Transformer model (Nemotron-H), forward and backward,
by the kind its pattern gives each (`ModelSpec.pattern`, `hybrid_spec`).

Megatron-Core's `MambaStack` (megatron/core/ssm/mamba_block.py) builds one layer a pattern
character, each with its own pre-norm and residual add, the norm fused into the layer's
first linear (`TELayerNormColumnParallelLinear`): `M` a `MambaLayer` (`mamba`), `*` a
`TransformerLayer` holding self-attention only (norm → QKV → core attention → output
projection → residual; its MLP is an identity), `-` a `TransformerLayer` holding the MLP
only (norm → FC1 → activation → FC2 → residual), `E` a `TransformerLayer` holding an MoE
MLP only (norm → router, dispatch, experts, combine, shared expert → residual: `moe`'s
layer, its all-to-alls on the EP group). The attention and MLP halves are `layer`'s
(the same GEMMs, collectives, FP8 casts and userbuffers splits); Nemotron-H's attention
has no position embedding (`position` "none": no RoPE kernel). Full recompute re-runs a
layer's forward before its backward; Megatron's selective modules act on the layers they
name (`core_attn` the attention layers, `mlp` the MLP layers, `moe_act` the experts'
activations, `layernorm` every layer's norm).
"""

from __future__ import annotations

from lumos.simulator.workload import elementwise as ew
from lumos.simulator.workload.attention import attention_bwd, attention_fwd
from lumos.simulator.workload.block import Block
from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.layer import (
    _cast,
    _mlp_forward,
    _mlp_recompute,
    _reduced_gemm,
    _row_backward,
    col_backward,
    gathered_gemm,
)
from lumos.simulator.workload.mamba import mamba_backward, mamba_forward
from lumos.simulator.workload.moe import moe_backward, moe_forward

#: what a hybrid model's estimate assumes, and how it has done (docs/estimate.md, "Hybrid
#: Mamba-2 / Transformer models")
HYBRID_ASSUMPTION = (
    "hybrid Mamba-2 layers as Megatron-Core's MambaMixer trains them (mamba_ssm's fused conv "
    "and SSD scan, the scan's kernels bandwidth-bound at 0.392 of peak HBM, the Triton "
    "forward's rate measured on an H100; the backward's kernels, unmeasured, priced at it); "
    "accuracy: 11-16 % too fast against DGX Cloud's Nemotron-H 56B H100 runs"
)


def _kind(ctx: Ctx, index: int) -> str:
    return ctx.model.pattern[index]


def _residual(blk: Block, ctx: Ctx, name: str, waits: tuple[int, ...]) -> int:
    return blk.compute(name, *ctx.mem(ctx.T_sp * ctx.h * BF16 * 3), waits=waits)


def _attention_forward(blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...]) -> int:
    T, h = ctx.T, ctx.h
    ln = ew.norm(blk, ctx, f"{tag}.norm1", waits=waits)
    gathered_gemm(blk, ctx, f"{tag}.qkv", (T, ctx.qkv_width, h), ln, None)
    ew.qk_prep(blk, ctx, tag)
    attention_fwd(blk, ctx, tag)
    _cast(blk, ctx, f"{tag}.proj", T * ctx.attn_out_width)
    rs = _reduced_gemm(blk, ctx, f"{tag}.proj", (T, h, ctx.attn_out_width))
    return _residual(blk, ctx, f"{tag}.residual1", rs)


def _mlp_layer_forward(blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...]) -> int:
    ln = ew.norm(blk, ctx, f"{tag}.norm2", waits=waits)
    return _residual(blk, ctx, f"{tag}.residual2", _mlp_forward(blk, ctx, tag, ln))


def _moe_layer_forward(blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...]) -> int:
    ln = ew.norm(blk, ctx, f"{tag}.norm2", waits=waits)
    return _residual(blk, ctx, f"{tag}.residual2", moe_forward(blk, ctx, tag, ln))


def hybrid_forward(blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...], index: int) -> int:
    """Append the forward of layer `index` as its kind runs it (module doc); returns its
    residual add."""
    kind = _kind(ctx, index)
    if kind == "M":
        return mamba_forward(blk, ctx, tag, waits)
    if kind == "*":
        return _attention_forward(blk, ctx, tag, waits)
    if kind == "E":
        return _moe_layer_forward(blk, ctx, tag, waits)
    return _mlp_layer_forward(blk, ctx, tag, waits)


def _attention_backward(blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...]) -> int:
    h = ctx.h
    blk.compute(f"{tag}.residual1_bwd", *ctx.mem(ctx.T_sp * h * BF16 * 2), waits=waits)
    _row_backward(blk, ctx, f"{tag}.proj", h, ctx.attn_out_width)
    attention_bwd(blk, ctx, tag)
    ew.qk_prep(blk, ctx, tag, backward=True)
    if "layernorm" in ctx.plan.selective_modules:
        ew.norm(blk, ctx, f"{tag}.norm1.recompute")
    red = col_backward(blk, ctx, f"{tag}.qkv", ctx.qkv_width, h)
    return ew.norm(blk, ctx, f"{tag}.norm1_bwd", backward=True, waits=red)


def _mlp_layer_backward(blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...]) -> int:
    h = ctx.h
    blk.compute(f"{tag}.residual2_bwd", *ctx.mem(ctx.T_sp * h * BF16 * 2), waits=waits)
    if "layernorm" in ctx.plan.selective_modules:
        ew.norm(blk, ctx, f"{tag}.norm2.recompute")
    if "mlp" in ctx.plan.selective_modules:
        _mlp_recompute(blk, ctx, tag)
    _row_backward(blk, ctx, f"{tag}.fc2", h, ctx.ffn)
    ew.activation(blk, ctx, f"{tag}.activation_bwd", backward=True)
    red = col_backward(blk, ctx, f"{tag}.fc1", ctx.up_width, h)
    return ew.norm(blk, ctx, f"{tag}.norm2_bwd", backward=True, waits=red)


def _moe_layer_backward(blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...]) -> int:
    blk.compute(f"{tag}.residual2_bwd", *ctx.mem(ctx.T_sp * ctx.h * BF16 * 2), waits=waits)
    if "layernorm" in ctx.plan.selective_modules:
        ew.norm(blk, ctx, f"{tag}.norm2.recompute")
    red = moe_backward(blk, ctx, tag)
    return ew.norm(blk, ctx, f"{tag}.norm2_bwd", backward=True, waits=red)


def hybrid_backward(blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...], index: int) -> int:
    """Append the backward of layer `index` (its forward re-run first under full
    recompute); returns its last node."""
    if ctx.plan.recompute.value == "full":
        hybrid_forward(blk, ctx, f"{tag}.recompute", waits, index)
        waits = ()
    kind = _kind(ctx, index)
    if kind == "M":
        return mamba_backward(blk, ctx, tag, waits)
    if kind == "*":
        return _attention_backward(blk, ctx, tag, waits)
    if kind == "E":
        return _moe_layer_backward(blk, ctx, tag, waits)
    return _mlp_layer_backward(blk, ctx, tag, waits)
