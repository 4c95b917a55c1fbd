"""Core attention of one layer: flash (fused) or unfused, with ring context parallelism.

Flash attention is one kernel forward and one backward (which recomputes the scores
itself), at the framework's attention kernel efficiency (`framework.ATTENTION`), between
the framework's unpad / pad copies where it runs the varlen kernel (`framework.UNPAD`).
Unfused attention (Megatron before flash attention) is a batched QKᵀ GEMM, a
fused scale-mask-softmax(-dropout) over the [s, s] scores, and a batched score·V GEMM.
Selective recomputation checkpoints the core attention (Megatron-core's default
`recompute_modules: [core_attn]`): its forward runs again before its backward — the
three unfused kernels, or the flash forward (with its ring passes under CP). With flash
attention that buys almost no memory (the checkpoint keeps q, k, v, which the backward
needs anyway) and costs one attention forward per layer and micro-batch.

Context parallelism (ring attention): each CP rank holds s/cp query tokens and passes
its K/V shard round the ring (send to the next CP rank, receive from the previous, on
CP send/recv streams): cp attention steps, step i waiting for the i-th shard. With the
causal load balancing of Megatron/TE each off-diagonal step covers half a shard. Profiles
with `torch_cp` (torchtitan) run PyTorch's `context_parallel` instead: the same kernel
steps between an all-gather of the K/V, FP32 merges and an FP32 dK/dV ring (`cp_torch`).

Multi-head latent attention runs the same kernel with a QK head width (`qk_nope` +
`qk_rope`, 192 for DeepSeek-V3) other than its V head width (`v_head`, 128): QKᵀ costs
2·s·s·d_qk and AV 2·s·s·d_v FLOPs per head, so the kernel is priced at the mean width
(d_qk + d_v) / 2, which gives exactly those FLOPs; the ring passes K and V at their widths.
"""

from __future__ import annotations

from lumos.simulator.workload.block import CP_RECV, CP_SEND, Block
from lumos.simulator.workload.cp_torch import CP_NEXT, CP_PREV, torch_ring_bwd, torch_ring_fwd
from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.elementwise import flash_padding

RING_TAG = 100


def _kv_bytes(ctx: Ctx) -> int:
    return ctx.T * ctx.kv_heads * (ctx.model.qk_dim + ctx.model.v_dim) * BF16


def _dim(ctx: Ctx) -> int:
    """The head width the flash kernel is priced at (module doc; `d` unless MLA)."""
    return (ctx.model.qk_dim + ctx.model.v_dim) // 2


def band(ctx: Ctx, window: int = 0) -> int:
    """Mean keys a query attends to where that is not the whole causal sequence, else 0:
    within a sliding window (`window` < s) query i sees min(i + 1, window) keys,
    w - w (w - 1) / 2n on average over n queries (n / 2 at w = n, causal attention); in
    packed sequences (`packed_doc_len` L < s: documents concatenated, attention within each,
    Transformer Engine / flash-attention's varlen kernels on `cu_seqlens`) n is a
    document's length, L the length-weighted mean E[l²]/E[l] (for which the mean over the
    documents' queries is the same), and w the window if it is shorter."""
    doc = ctx.plan.packed_doc_len
    n = doc if 0 < doc < ctx.s else ctx.s
    w = window if 0 < window < n else n
    if n == ctx.s and w == n:
        return 0
    return w - w * (w - 1) // (2 * n)


def _ring_steps(blk: Block, ctx: Ctx, name: str, backward: bool, window: int = 0) -> None:
    """cp flash-attention steps, each after receiving the next K/V (and dK/dV) shard; with
    a sliding window or packed sequences (no CP) one step over their band (`band`), not the
    causal square."""
    cp = ctx.plan.cp
    keys = band(ctx, window)
    if keys and cp == 1:
        bh, scale = ctx.b * ctx.heads, ctx.fw.attention_scale(backward)
        ns = ctx.km.attention_ns(bh, ctx.s, keys, _dim(ctx), False, backward, scale)
        flops = ctx.km.attention_flops(bh, ctx.s, keys, _dim(ctx), False, backward)
        blk.compute(name, ns, flops, float(ctx.T * ctx.qkv_width * BF16))
        return
    bh = ctx.b * ctx.heads
    scale = ctx.fw.attention_scale(backward)

    def step(i: int, waits: tuple[int, ...]) -> None:
        """Step i's kernel: the local causal shard, then half a shard (load balance)."""
        skv = ctx.s if i == 0 else ctx.s // 2
        ns = ctx.km.attention_ns(bh, ctx.s, skv, _dim(ctx), i == 0, backward, scale)
        flops = ctx.km.attention_flops(bh, ctx.s, skv, _dim(ctx), i == 0, backward)
        blk.compute(name, ns, flops, float(ctx.T * ctx.qkv_width * BF16), waits=waits)

    if cp > 1 and ctx.fw.torch_cp:
        (torch_ring_bwd if backward else torch_ring_fwd)(blk, ctx, name, step)
        return
    size = _kv_bytes(ctx) * (2 if backward else 1)
    recv = -1
    for i in range(cp):
        if i:
            after = recv if recv >= 0 else blk.last_compute
            blk.p2p(f"{name}.kv_send", True, CP_SEND, size, CP_NEXT, RING_TAG, after)
            recv = blk.p2p(f"{name}.kv_recv", False, CP_RECV, size, CP_PREV, RING_TAG, -1)
        step(i, (recv,))


def _checkpointed(ctx: Ctx) -> bool:
    """Core attention re-runs before its backward: Megatron's selective recompute (not
    torchtitan's "op" policy, which saves the attention output)."""
    return "core_attn" in ctx.plan.selective_modules and not ctx.fw.selective_op


def _unfused(blk: Block, ctx: Ctx, name: str, backward: bool) -> None:
    bh, s, d = ctx.b * ctx.heads, ctx.s, ctx.d
    scores = bh * s * s * BF16
    km = ctx.km
    if not backward:
        blk.compute(f"{name}.qk", km.gemm_ns(s, s, d, batch=bh), 2.0 * bh * s * s * d, scores)
        blk.compute(f"{name}.softmax", *ctx.mem(scores * 2.5))
        blk.compute(f"{name}.av", km.gemm_ns(s, d, s, batch=bh), 2.0 * bh * s * s * d, scores)
        return
    if _checkpointed(ctx):
        _unfused(blk, ctx, f"{name}.recompute", False)
    for part in ("av_dgrad", "av_wgrad", "qk_dgrad", "qk_wgrad"):
        m, n, k = (s, s, d) if part in ("av_dgrad", "qk_wgrad") else (s, d, s)
        blk.compute(f"{name}.{part}", km.gemm_ns(m, n, k, batch=bh), 2.0 * bh * s * s * d, scores)
        if part == "av_wgrad":
            blk.compute(f"{name}.softmax_bwd", *ctx.mem(scores * 3.5))


def attention_fwd(blk: Block, ctx: Ctx, tag: str, window: int = 0) -> None:
    """Core attention forward; `window`: sliding-window span (flash only; 0: full)."""
    if not ctx.plan.flash_attention:
        _unfused(blk, ctx, f"{tag}.attention", False)
    else:
        flash_padding(blk, ctx, f"{tag}.attention", False, before=True)
        _ring_steps(blk, ctx, f"{tag}.attention", False, window)
        flash_padding(blk, ctx, f"{tag}.attention", False, before=False)


def attention_bwd(blk: Block, ctx: Ctx, tag: str, window: int = 0) -> None:
    if not ctx.plan.flash_attention:
        _unfused(blk, ctx, f"{tag}.attention_bwd", True)
    else:
        if _checkpointed(ctx):
            _ring_steps(blk, ctx, f"{tag}.attention_bwd.recompute", False, window)
        flash_padding(blk, ctx, f"{tag}.attention_bwd", True, before=True)
        _ring_steps(blk, ctx, f"{tag}.attention_bwd", True, window)
        flash_padding(blk, ctx, f"{tag}.attention_bwd", True, before=False)
