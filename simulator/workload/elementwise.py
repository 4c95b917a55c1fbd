"""The memory-bound kernels of one layer as the plan's framework runs them.

Norms, RoPE, the MLP activation, GQA's K/V expansion and FP8 casts are priced by the
kernel model's memory-bound rule (bytes over achieved HBM bandwidth, a fixed overhead per
kernel). The framework profile (`framework`) says how many bytes and kernels: fused (TE
kernels, Inductor, PyTorch's native LayerNorm) reads the input and writes the output once;
eager torchtitan runs its model code's op chain (`framework.EAGER`), one kernel per op.
"""

from __future__ import annotations

from lumos.simulator.workload.block import Block
from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.fp8 import CAST_TRANSPOSE_BYTES
from lumos.simulator.workload.framework import (
    CAST_BYTES,
    EAGER,
    FUSED_LOSS_BYTES,
    TRANSPOSE_BYTES,
    UNFUSED_CROSS_ENTROPY,
    UNPAD,
    WEIGHT_CAST_BYTES,
    Eager,
)
from lumos.simulator.workload.spec import Norm


def kernels(
    blk: Block, ctx: Ctx, name: str, nbytes: float, count: int, waits: tuple[int, ...] = ()
) -> int:
    """One node standing for `count` memory-bound kernels back to back moving `nbytes` in
    all: the bytes at the achieved HBM rate, plus each kernel's fixed overhead."""
    ns = ctx.km.memory_ns(nbytes, overhead=False) + count * ctx.km.physics.kernel_overhead_ns
    return blk.compute(name, ns, 0.0, float(nbytes), waits=waits)


def chain(
    blk: Block, ctx: Ctx, name: str, op: Eager, elements: float, waits: tuple[int, ...] = ()
) -> int:
    """One node standing for an eager op chain over `elements` (its kernels back to back)."""
    return kernels(blk, ctx, name, op.bytes_per_element * elements, op.kernels, waits)


def norm(
    blk: Block, ctx: Ctx, name: str, backward: bool = False, waits: tuple[int, ...] = ()
) -> int:
    """A norm over the sequence-parallel shard: fused, 2 passes forward / 3 backward over
    BF16; eager RMSNorm as torchtitan's Python chain (LayerNorm is one native kernel)."""
    return _norm_over(blk, ctx, name, ctx.T_sp * ctx.h, backward, waits)


def _norm_over(
    blk: Block, ctx: Ctx, name: str, elements: int, backward: bool, waits: tuple[int, ...] = ()
) -> int:
    if ctx.fw.eager and ctx.model.norm is Norm.RMSNORM:
        return chain(blk, ctx, name, EAGER["rmsnorm"][backward], elements, waits)
    return blk.compute(name, *ctx.mem(elements * BF16 * (3 if backward else 2)), waits=waits)


def qk_norm(blk: Block, ctx: Ctx, name: str, backward: bool = False) -> None:
    """The RMSNorm over each local query and key head (`ModelSpec.qk_norm`: Qwen3's and
    Gemma 3's `q_norm` / `k_norm`, Megatron's `qk_layernorm`), as the layer's norms are."""
    if ctx.model.qk_norm:
        elements = ctx.T * (ctx.heads + ctx.kv_heads) * ctx.model.qk_dim
        _norm_over(blk, ctx, name, elements, backward)


def qk_prep(blk: Block, ctx: Ctx, tag: str, backward: bool = False) -> None:
    """What runs on the local q, k, v heads between the QKV GEMM and attention: the per-head
    q / k norm, RoPE and torchtitan's `repeat_kv` (each only where the model / profile has
    it); the backward runs them in reverse order."""
    rope_on = ctx.model.position == "rope"
    if backward:
        repeat_kv(blk, ctx, f"{tag}.repeat_kv", backward=True)
        if rope_on:
            rope(blk, ctx, f"{tag}.rope_bwd", backward=True)
        qk_norm(blk, ctx, f"{tag}.qk_norm_bwd", backward=True)
        return
    qk_norm(blk, ctx, f"{tag}.qk_norm")
    if rope_on:
        rope(blk, ctx, f"{tag}.rope")
    repeat_kv(blk, ctx, f"{tag}.repeat_kv")


def logit_softcap(blk: Block, ctx: Ctx, prefix: str, backward: bool = False) -> None:
    """Gemma 2's `final_logit_softcapping` (cap · tanh(logits / cap)) over the local logits:
    read and write BF16; the backward reads the capped logits and their gradient."""
    if ctx.model.logit_softcap:
        name = f"{prefix}logit_softcap" + ("_bwd" if backward else "")
        blk.compute(name, *ctx.mem(ctx.T * ctx.vocab * BF16 * (3 if backward else 2)))


def rope(blk: Block, ctx: Ctx, name: str, backward: bool = False) -> None:
    """Rotary embedding of the local q and k heads (fused: one read and one write; eager:
    the profile's op chain, `Profile.rope_chain`)."""
    elements = ctx.T * (ctx.heads + ctx.kv_heads) * ctx.d
    if ctx.fw.eager:
        chain(blk, ctx, name, EAGER[ctx.fw.rope_chain][backward], elements)
    else:
        blk.compute(name, *ctx.mem(elements * BF16 * 2))


def repeat_kv(blk: Block, ctx: Ctx, name: str, backward: bool = False) -> None:
    """torchtitan's `repeat_kv`: K and V expanded from the KV heads to the query heads (a
    copy each), summed back in the backward. Fused attention reads the KV heads as they are."""
    if not ctx.fw.repeat_kv or ctx.heads <= ctx.kv_heads:
        return
    nbytes = 2 * ctx.T * ctx.d * (ctx.heads + ctx.kv_heads) * BF16
    kernels(blk, ctx, f"{name}{'_bwd' if backward else ''}", nbytes, 2)


def activation(blk: Block, ctx: Ctx, name: str, backward: bool = False) -> None:
    """The MLP activation over the local FFN width (gated: act(gate) * up)."""
    T, ffn, up = ctx.T, ctx.ffn, ctx.up_width
    if ctx.fw.eager and ctx.model.gated:  # act(gate) then x up: the same ops for GeGLU
        chain(blk, ctx, name, EAGER["swiglu"][backward], T * ffn)
        return
    nbytes = T * ((2 * up + ffn) if backward else (up + ffn)) * BF16
    blk.compute(name, *ctx.mem(nbytes))


def flash_padding(blk: Block, ctx: Ctx, name: str, backward: bool, before: bool) -> None:
    """llm-foundry's unpad / pad copies around the varlen flash kernel (`framework.UNPAD`):
    the q, k, v side runs before the forward kernel and after the backward one, the output
    side after the forward and before the backward."""
    if not ctx.fw.unpad:
        return
    side = "qkv" if before != backward else "out"
    width = ctx.qkv_width if side == "qkv" else ctx.attn_out_width
    op = UNPAD[side][backward]
    chain(blk, ctx, f"{name}.{'unpad' if side == 'qkv' else 'pad'}", op, ctx.T * width)


def input_casts(blk: Block, ctx: Ctx, name: str, elements: int, linears: int) -> None:
    """FP8 casts of a GEMM input that Transformer Engine fuses into the norm before it but
    torchao casts per linear (one cast for all `linears` reading it when AOTAutograd's CSE
    merges them), as does a lone `te.Linear` after a PyTorch norm / activation
    (`unfused_casts`, one fused QKV linear: `shared_casts`)."""
    if ctx.linear_dtype != "fp8" or not (ctx.fw.fp8_dynamic or ctx.fw.unfused_casts):
        return
    casts = 1 if ctx.fw.shared_casts else linears
    per = CAST_TRANSPOSE_BYTES if ctx.fw.unfused_casts else CAST_BYTES  # te.Linear: + its transpose
    blk.compute(f"{name}.cast_fp8", *ctx.mem(casts * elements * per))


def weight_casts(blk: Block, ctx: Ctx, name: str) -> None:
    """A lone `te.Linear` called without `is_first_microbatch` re-casts its BF16 weight to
    FP8 and its transpose on every forward (`unfused_casts`); Megatron caches them per step."""
    if ctx.linear_dtype == "fp8" and ctx.fw.unfused_casts:
        nbytes = ctx.layer_params_local() * WEIGHT_CAST_BYTES
        blk.compute(f"{name}.weight_cast_fp8", *ctx.mem(nbytes))


def bias_grad(blk: Block, ctx: Ctx, name: str, elements: int) -> None:
    """PyTorch autograd's bias gradient of a BF16 `nn.Linear` (`bias_sum`): the output
    gradient (`elements`) summed over the tokens, one read in its own kernel."""
    if ctx.model.bias and ctx.fw.bias_sum and ctx.linear_dtype != "fp8" and not ctx.plan.lora_rank:
        blk.compute(f"{name}.bgrad", *ctx.mem(elements * BF16))


def wgrad_transposes(blk: Block, ctx: Ctx, name: str, elements: int) -> None:
    """torchao's column-major FP8 copies of a weight-gradient GEMM's two operands
    (`elements`: both operands' elements)."""
    if ctx.linear_dtype == "fp8" and ctx.fw.fp8_dynamic:
        blk.compute(f"{name}.transpose_fp8", *ctx.mem(elements * TRANSPOSE_BYTES))


def cross_entropy(
    blk: Block, ctx: Ctx, backward: bool, waits: tuple[int, ...] = (), prefix: str = ""
) -> int:
    """The loss over the local vocabulary shard (FP32 softmax); torchtitan runs PyTorch's
    unfused cross-entropy on FP32-cast logits, whose backward moves more; llm-foundry
    flash_attn's fused kernel on the BF16 logits (`FUSED_LOSS_BYTES`); a plan without
    `loss_fusion` runs Megatron-Core's unfused vocab-parallel one (`UNFUSED_CROSS_ENTROPY`).
    `prefix`: of the node's name (a multi-token-prediction loss)."""
    elements = ctx.T * ctx.vocab
    name = f"{prefix}cross_entropy{'_bwd' if backward else ''}"
    if ctx.fw.eager_loss:
        op = EAGER["cross_entropy"][backward]
        return chain(blk, ctx, name, op, elements, waits)
    if ctx.fw.fused_loss:
        return blk.compute(name, *ctx.mem(elements * FUSED_LOSS_BYTES[backward]), waits=waits)
    if not ctx.plan.loss_fusion:  # Megatron-Core's unfused path (its default)
        return chain(blk, ctx, name, UNFUSED_CROSS_ENTROPY[backward], elements, waits)
    return blk.compute(name, *ctx.mem(elements * (6 if backward else 14)), waits=waits)
