"""Multi-head latent attention (DeepSeek-V2/V3 MLA) up to the core attention, forward and
backward, as Megatron-Core's `MLASelfAttention` runs it.

On one TP rank (n = heads / tp local heads, d_qk = `qk_nope` + `qk_rope`): after the
layer's input norm, the query down-projection [hidden → `q_lora`] and the KV
down-projection [hidden → `kv_lora` + `qk_rope`] run on the rank's own tokens (the
sequence-parallel shard T_sp; all T without SP) with weights every TP rank holds whole
(TELinear `parallel_mode="duplicated"`), then an RMSNorm over each latent. The
up-projections are column-parallel by heads: queries [`q_lora` → n·d_qk], keys and values
[`kv_lora` → n·(`qk_nope` + `v_head`)], each after an SP all-gather of its latent (the
KV gather also brings the shared RoPE key, `qk_rope` wide: Megatron gathers it alone,
priced together here). Without `q_lora` the queries are one column-parallel projection of
the hidden state. RoPE is Megatron's fused MLA kernels: one over the queries (read and
write n·d_qk), one that reads the up-projected keys/values and the RoPE key and writes
the attention's K [n·d_qk] and V [n·`v_head`]. The core attention and the row-parallel
output projection (n·`v_head` → hidden) are `layer`'s. Backward mirrors it; the
down-projections' data and weight gradients need no TP collective (each rank has its own
tokens), and their weight gradients' sum over the SP shards (Megatron's all-reduce of
`sequence_parallel` parameters at the end of the step) is not priced.
"""

from __future__ import annotations

from lumos.simulator.workload import elementwise as ew
from lumos.simulator.workload.block import Block
from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.layer import _wgrad, col_backward, gathered_gemm


def _widths(ctx: Ctx) -> tuple[int, int, int]:
    """(local query up width, local KV up width, KV down width)."""
    m, n = ctx.model, ctx.heads
    return n * m.qk_dim, n * (m.qk_nope + m.v_dim), m.kv_lora + m.qk_rope


def _rope_bytes(ctx: Ctx) -> tuple[int, int]:
    """Bytes of the fused MLA RoPE kernels: (queries, keys and values)."""
    m, T, n = ctx.model, ctx.T, ctx.heads
    q = 2 * T * n * m.qk_dim
    kv = T * n * (m.qk_nope + m.v_dim) + T * m.qk_rope + T * n * (m.qk_dim + m.v_dim)
    return q * BF16, kv * BF16


def _cast(blk: Block, ctx: Ctx, name: str, elems: int) -> None:
    """FP8 quantisation of a down-projection's input or output gradient: TELinear after a
    separate norm casts its own input (no LayerNormLinear fusion)."""
    if ctx.linear_dtype == "fp8":
        blk.compute(f"{name}.cast_fp8", *ctx.mem(elems * 3))


def mla_forward(blk: Block, ctx: Ctx, tag: str, ln: int) -> int:
    """Append the projections and RoPE after the input norm `ln`; returns the last node."""
    m, h, rows = ctx.model, ctx.h, ctx.T_sp
    kv_down = _widths(ctx)[2]
    _cast(blk, ctx, f"{tag}.kv_down", rows * h)  # one cast, read by both down-projections
    if m.q_lora:
        blk.compute(f"{tag}.q_down", *ctx.gemm(rows, m.q_lora, h), waits=(ln,))
    kvd = blk.compute(f"{tag}.kv_down", *ctx.gemm(rows, kv_down, h), waits=(ln,))
    qn = ln
    if m.q_lora:
        qn = blk.compute(f"{tag}.q_norm", *ctx.mem(rows * m.q_lora * BF16 * 2))
    kvn = blk.compute(f"{tag}.kv_norm", *ctx.mem(rows * m.kv_lora * BF16 * 2), waits=(kvd,))
    return up_forward(blk, ctx, tag, (qn, kvn))


def up_forward(blk: Block, ctx: Ctx, tag: str, latents: tuple[int, int]) -> int:
    """The up-projections (after the normed latents' nodes) and the RoPE kernels; also what
    Megatron's `mla_up_proj` recompute module re-runs before the core attention's backward
    (q, k and v are then not kept)."""
    m, T, h, rows = ctx.model, ctx.T, ctx.h, ctx.T_sp
    q_up, kv_up, kv_down = _widths(ctx)
    qn, kvn = latents
    if m.q_lora:
        gather = rows * m.q_lora * BF16
        gathered_gemm(blk, ctx, f"{tag}.q_up", (T, q_up, m.q_lora), qn, None, gather=gather)
    else:
        gathered_gemm(blk, ctx, f"{tag}.q_proj", (T, q_up, h), qn, None)
    gather = rows * kv_down * BF16
    gathered_gemm(blk, ctx, f"{tag}.kv_up", (T, kv_up, m.kv_lora), kvn, None, gather=gather)
    q_bytes, kv_bytes = _rope_bytes(ctx)
    blk.compute(f"{tag}.rope_q", *ctx.mem(q_bytes))
    return blk.compute(f"{tag}.rope_kv", *ctx.mem(kv_bytes))


def _down_backward(blk: Block, ctx: Ctx, name: str, width: int, waits: tuple[int, ...]) -> None:
    """Data and weight gradient of a replicated down-projection (fwd M=T_sp, N=width, K=h)."""
    rows, h = ctx.T_sp, ctx.h
    _cast(blk, ctx, f"{name}.grad", rows * width)
    blk.compute(f"{name}.dgrad", *ctx.gemm(rows, h, width), waits=waits)
    _wgrad(blk, ctx, name, (width, h, rows))


def mla_backward(blk: Block, ctx: Ctx, tag: str, norms: bool) -> tuple[int, ...]:
    """Append the backward from the RoPE kernels to the down-projections (after the core
    attention's backward); `norms`: the input norm's output is re-computed first (the
    `layernorm` recompute module). Returns what the input norm's backward waits for."""
    m, h, rows = ctx.model, ctx.h, ctx.T_sp
    q_up, kv_up, kv_down = _widths(ctx)
    q_bytes, kv_bytes = _rope_bytes(ctx)
    blk.compute(f"{tag}.rope_kv_bwd", *ctx.mem(kv_bytes))
    blk.compute(f"{tag}.rope_q_bwd", *ctx.mem(q_bytes))
    if norms:
        ew.norm(blk, ctx, f"{tag}.norm1.recompute")
    gather = rows * kv_down * BF16
    red = col_backward(blk, ctx, f"{tag}.kv_up", kv_up, m.kv_lora, gather=gather)
    kv_norm = rows * m.kv_lora * BF16 * 3
    kvn = blk.compute(f"{tag}.kv_norm_bwd", *ctx.mem(kv_norm), waits=red)
    _down_backward(blk, ctx, f"{tag}.kv_down", kv_down, (kvn,))
    if not m.q_lora:
        return col_backward(blk, ctx, f"{tag}.q_proj", q_up, h)
    gather = rows * m.q_lora * BF16
    red = col_backward(blk, ctx, f"{tag}.q_up", q_up, m.q_lora, gather=gather)
    qn = blk.compute(f"{tag}.q_norm_bwd", *ctx.mem(rows * m.q_lora * BF16 * 3), waits=red)
    _down_backward(blk, ctx, f"{tag}.q_down", m.q_lora, (qn,))
    return ()
