"""The MLP of a mixture-of-experts layer, as Megatron-Core runs it with the all-to-all
token dispatcher and grouped GEMMs, forward and backward.

On one rank (its T_sp tokens, the sequence-parallel shard under TP): router GEMM
[T_sp, h] x [h, experts] (BF16) → softmax / top-k (memory-bound, FP32 logits) → permute
(each token copied once per chosen expert: `routed = T_sp·top_k` rows) → all-to-all
*dispatch* over the EP group (`routed·h` BF16 bytes sent, balanced routing: the published
runs are token-balanced) → [expert TP > 1: all-gather over the TP group] → sort by local
expert (more than one local expert: `_sort`) → expert FC1 as
one grouped GEMM over the `experts/ep` local experts, each with `tokens_per_expert =
T_sp·top_k·ep·etp / experts` rows (few rows cost GEMM efficiency: the kernel model's
tiles and waves) → activation → FC2 grouped GEMM → unsort → [reduce-scatter over TP] → all-to-all
*combine* → unpermute (weighted sum of each token's top_k outputs). A shared expert runs
as a dense tensor-parallel MLP on the same tokens. Backward mirrors it: the combine's
gradient all-to-all first, data- and weight-gradient grouped GEMMs, the dispatch's
gradient all-to-all, the router's two GEMMs. All-to-alls run on the EP stream and the
compute stream waits for them; with the plan's `a2a_overlap` (Megatron-Core's
`overlap_moe_expert_parallel_comm`) a forward and a backward pass are merged layer by
layer from the parts below (`route`, `dispatch`, `experts`, `combine`, `finish` and their
backward counterparts) so that one's all-to-alls overlap the other's compute
(`moe_overlap`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lumos.simulator.network.api import ALL_GATHER, ALL_TO_ALL, REDUCE_SCATTER
from lumos.simulator.workload import fp8, moe_host, moe_meta
from lumos.simulator.workload.block import EP, EP_STREAM, TP, TP_STREAM, Block
from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.layer import (
    _reduced_gemm,
    _row_backward,
    col_backward,
    gathered_gemm,
)
from lumos.simulator.workload.moe_load import load_factor

FP32 = 4


@dataclass(frozen=True, slots=True)
class MoeSizes:
    """Per-rank sizes of one MoE layer (see module doc)."""

    local_experts: int
    routed: int  # token copies this rank sends (its own tokens x top_k: the permute's rows)
    received: int  # token copies its local experts process (after the expert-TP gather)
    per_expert: int
    ffn: int  # one expert's FFN width on this rank (split over expert TP)
    up: int  # FC1 output width (x2 when gated)
    sent: int  # rows one all-to-all moves on the busiest rank: `routed`, or tokens x ranks (flex)

    @classmethod
    def of(cls, ctx: Ctx) -> MoeSizes:
        """The busiest EP rank's sizes: its local experts and all-to-alls carry the mean
        load times `moe_load.load_factor` (the permute and unpermute stay the rank's own)."""
        m, p = ctx.model, ctx.plan
        local = m.experts // p.ep
        routed = ctx.T_sp * m.top_k
        load = load_factor(ctx)
        received = round(routed * p.expert_tp * load)
        ffn = m.moe_ffn // p.expert_tp
        sent = float(routed)
        if p.dispatcher == "flex":
            sent = ctx.T_sp * distinct_ranks(m.experts, p.ep, m.top_k)
        up = ffn * (2 if m.gated else 1)
        per = math.ceil(received / local)
        return cls(local, routed, received, per, ffn, up, round(sent * load))


def distinct_ranks(experts: int, ep: int, top_k: int) -> float:
    """Expected EP ranks one token goes to when its `top_k` experts are drawn uniformly
    without replacement (balanced routing) from `experts` spread evenly over `ep` ranks:
    ep x (1 - C(experts - experts/ep, top_k) / C(experts, top_k))."""
    missed = math.comb(experts - experts // ep, top_k) / math.comb(experts, top_k)
    return ep * (1.0 - missed)


def _flex(ctx: Ctx) -> bool:
    return ctx.plan.dispatcher == "flex"


def grouped_gemm(
    blk: Block,
    ctx: Ctx,
    name: str,
    m_n_k: tuple[int, int, int],
    groups: int,
    wgrad: bool = False,
    waits: tuple[int, ...] = (),
) -> int:
    """`groups` GEMMs of the same shape, in the linear-layer dtype (weight gradients
    accumulate into FP32 main gradients, as `Ctx.gemm`), priced as one grouped kernel
    (tiles of all groups share the waves). Under the plan's `grouped_gemm` "te"
    (Transformer Engine `GroupedLinear`: `general_grouped_gemm` issues one cuBLASLt GEMM
    per local expert from a host loop, `nvte_multi_stream_cublas_gemm`) the group is never
    faster than the host issuing it: `groups` x the kernel file's `grouped_gemm_expert_ns`
    (the host cannot run ahead: dropless routing syncs it with the GPU every MoE layer).
    Under "sequential" (Megatron-Core's `SequentialMLP`) each expert's GEMM is its own
    kernel: `groups` x one GEMM's time."""
    m, n, k = m_n_k
    dt = ctx.linear_dtype
    size = 1 if dt == "fp8" else BF16
    out = 8 if wgrad else BF16
    ns = ctx.km.gemm_ns(m, n, k, dt, batch=groups, out_bytes=out)
    if _sequential(ctx):  # one MLP module per expert: its own GEMM kernels, one after another
        ns = groups * ctx.km.gemm_ns(m, n, k, dt, out_bytes=out)
    if ctx.plan.grouped_gemm == "te":
        ns = max(ns, groups * ctx.km.physics.grouped_gemm_expert_ns)
    nbytes = groups * ((m * k + k * n) * size + m * n * out)
    return blk.compute(name, ns, 2.0 * m * n * k * groups, float(nbytes), waits=waits)


def _sequential(ctx: Ctx) -> bool:
    return ctx.plan.grouped_gemm == "sequential"


def _sequential_copies(
    blk: Block, ctx: Ctx, name: str, z: MoeSizes, passes: float, after: int
) -> int:
    """Megatron-Core 0.9's `SequentialMLP` (`moe_grouped_gemm` false; experts.py,
    `SequentialMLP.forward`) gathers its experts' outputs into `output_local =
    torch.zeros_like(permuted_local_hidden_states)` by `output_local[start:end] = output`
    per local expert, and slices each expert's input `permuted_local_hidden_states[start:
    end]`: memory-bound passes over the received rows (B = received x hidden BF16 bytes),
    `passes` of them (`sequential_passes`)."""
    if not _sequential(ctx) or passes == 0:
        return after
    nbytes = passes * z.received * ctx.h * BF16
    return blk.compute(name, *ctx.mem(round(nbytes)), waits=(after,))


def sequential_passes(n: int) -> tuple[float, float, float]:
    """Passes over B of SequentialMLP's copies with `n` local experts: (forward, the
    output slice assignments' gradient, the input slices' gradient), as PyTorch's autograd
    runs them (counted with its profiler: scripts/sequential_mlp_bytes.py). Forward: the
    zero fill and the copies, 3. Backward, n > 1: each slice assignment's `CopySlices`
    (torch/csrc/autograd/functions/tensor.cpp) copies the whole incoming gradient (2) and
    clones its slice (2/n), all but the first also zeroing and re-copying it (3/n):
    2n + 2 + 3(n - 1)/n; each input slice's `slice_backward` (derivatives.yaml) fills a
    full-size zero gradient and copies its slice in (1 + 2/n), the n summed (3 each after
    the first): 4n - 1. With one expert the slices span the whole tensor and indexing
    returns the tensor itself: the assignment is a plain `copy_` (no CopySlices), 0 and 3."""
    if n == 1:
        return 3.0, 0.0, 3.0
    return 3.0, 2 * n + 2 + 3 * (n - 1) / n, 4.0 * n - 1


def _cast(blk: Block, ctx: Ctx, name: str, elems: int) -> None:
    """FP8 quantisation of a grouped GEMM's input with its transpose for the weight
    gradient (TE's GroupedLinear: `fp8_multi_cast_transpose_fused`; a `SequentialMLP`
    expert's te.Linear: `fp8_cast_transpose_fused`)."""
    fp8.input_cast(blk, ctx, name, elems, transposed=True)


def _sort(blk: Block, ctx: Ctx, name: str, z: MoeSizes, after: int) -> int:
    """Megatron-Core's second permutation: the rows received from the EP (and expert-TP)
    peers arrive grouped by sender and are re-ordered by local expert before FC1 (and back
    after FC2, and both again on the gradients): one read and one write of the received
    BF16 rows, only with more than one local expert (token_dispatcher.py,
    MoEAlltoAllTokenDispatcher: `sort_chunks_by_idxs` in `dispatch_postprocess` /
    `combine_preprocess` under `num_local_experts > 1`; fused or not, one pass)."""
    if _flex(ctx):  # DeepEP: the arrived tokens permuted into (and back from) expert rows
        local = name.replace("unsort", "unpermute_local").replace("sort", "permute_local")
        nbytes = (z.sent + z.received) * ctx.h * BF16
        return blk.compute(local, *ctx.mem(nbytes), waits=(after,))
    if z.local_experts == 1:
        return after
    return blk.compute(name, *ctx.mem(2 * z.received * ctx.h * BF16), waits=(after,))


def _pad(blk: Block, ctx: Ctx, name: str, z: MoeSizes, after: int) -> int:
    """Under FP8, dropless routing leaves each expert a row count FP8 GEMMs cannot take
    (multiples of 16): Megatron-Core's TEGroupedMLP copies the rows into a padded buffer
    before FC1 and back out after FC2 (`Fp8Padding` / `Fp8Unpadding`, TE's
    `fused_multi_row_padding`; skipped with `moe_router_padding_for_fp8`, default off), and
    the reverse on the gradients: one read and one write of the received rows each.
    Megatron-Core 0.9's `SequentialMLP` has no such padding (plan `grouped_gemm`
    "sequential")."""
    if ctx.linear_dtype != "fp8" or _sequential(ctx):
        return after
    return blk.compute(name, *ctx.mem(2 * z.received * ctx.h * BF16), waits=(after,))


def _exchange(blk: Block, ctx: Ctx, name: str, rows: int, after: int, sync: int = -1) -> int:
    """An all-to-all of `rows` hidden-size BF16 rows over the EP group after `after` and
    the host's wait `sync` (none at ep 1: then what follows waits for the wait)."""
    if ctx.plan.ep == 1:
        return after if sync < 0 else sync
    return blk.coll(name, EP_STREAM, ALL_TO_ALL, rows * ctx.h * BF16, EP, (after, sync))


def _etp(blk: Block, ctx: Ctx, name: str, kind: int, rows: int, after: int) -> int:
    """Expert-TP gather (or reduce-scatter) of the dispatched rows over the TP group."""
    if ctx.plan.expert_tp == 1:
        return after
    size = rows * ctx.h * BF16 * (ctx.plan.expert_tp if kind == REDUCE_SCATTER else 1)
    return blk.coll(name, TP_STREAM, kind, size, TP, after)


def moe_forward(blk: Block, ctx: Ctx, tag: str, ln: int) -> tuple[int, ...]:
    """Append the MoE MLP after the norm `ln`; returns what the residual add waits for."""
    a2a = dispatch(blk, ctx, tag, route(blk, ctx, tag))
    return finish(blk, ctx, tag, ln, combine(blk, ctx, tag, experts(blk, ctx, tag, a2a)))


def route(blk: Block, ctx: Ctx, tag: str) -> int:
    """Router GEMM, top-k and the permute (the local work before the dispatch)."""
    z, m, h = MoeSizes.of(ctx), ctx.model, ctx.h
    name = f"{tag}.moe"
    moe_host.pre(blk, ctx, tag)
    blk.compute(f"{name}.router", *ctx.gemm(ctx.T_sp, m.experts, h, "bf16"))
    top = blk.compute(f"{name}.topk", *ctx.mem(ctx.T_sp * m.experts * FP32 * 2))
    top = moe_meta.counts(blk, ctx, tag, top)
    if _flex(ctx):  # DeepEP dispatches the tokens as they are and permutes on arrival
        return top
    return blk.compute(f"{name}.permute", *ctx.mem((ctx.T_sp + z.routed) * h * BF16))


def dispatch(blk: Block, ctx: Ctx, tag: str, perm: int) -> int:
    """The dispatch all-to-all after the permute `perm` and the host's wait for the token
    counts (`moe_meta`), then the probabilities' (alltoall dispatcher); returns what the
    experts wait for."""
    rows, sync = MoeSizes.of(ctx).sent, moe_meta.wait(blk, ctx, tag)
    moe_host.post(blk, ctx, tag, sync)
    a2a = _exchange(blk, ctx, f"{tag}.moe.dispatch", rows, perm, sync)
    return moe_meta.probs_exchange(blk, ctx, f"{tag}.moe.dispatch_probs", rows, a2a)


def experts(blk: Block, ctx: Ctx, tag: str, a2a: int) -> int:
    """The local experts on the dispatched rows (after `a2a`); returns the last node."""
    z, h, name = MoeSizes.of(ctx), ctx.h, f"{tag}.moe"
    got = _etp(blk, ctx, f"{name}.dispatch_all_gather", ALL_GATHER, z.sent, a2a)
    got = _pad(blk, ctx, f"{name}.fp8_pad", z, _sort(blk, ctx, f"{name}.sort", z, got))
    _cast(blk, ctx, f"{name}.fc1", z.received * h)
    grouped_gemm(blk, ctx, f"{name}.fc1", (z.per_expert, z.up, h), z.local_experts, waits=(got,))
    blk.compute(f"{name}.activation", *ctx.mem(z.received * (z.up + z.ffn) * BF16))
    _cast(blk, ctx, f"{name}.fc2", z.received * z.ffn)  # the BF16 activation's, by FC2
    out = grouped_gemm(blk, ctx, f"{name}.fc2", (z.per_expert, h, z.ffn), z.local_experts)
    passes = sequential_passes(z.local_experts)[0]
    out = _sequential_copies(blk, ctx, f"{name}.experts_gather", z, passes, out)
    out = _sort(blk, ctx, f"{name}.unsort", z, _pad(blk, ctx, f"{name}.fp8_unpad", z, out))
    return _etp(blk, ctx, f"{name}.combine_reduce_scatter", REDUCE_SCATTER, z.sent, out)


def combine(blk: Block, ctx: Ctx, tag: str, out: int) -> int:
    """The combine all-to-all after the experts' last node `out`."""
    return _exchange(blk, ctx, f"{tag}.moe.combine", MoeSizes.of(ctx).sent, out)


def finish(blk: Block, ctx: Ctx, tag: str, ln: int, back: int) -> tuple[int, ...]:
    """The shared expert (on the norm `ln`) and the unpermute after the combine `back`;
    returns what the residual add waits for."""
    waits: tuple[int, ...] = (moe_host.pending_post(blk, tag),)
    if ctx.model.shared_ffn:
        waits = (*waits, *_shared_forward(blk, ctx, tag, ln))
    if _flex(ctx):  # DeepEP's combine sums each token's copies in its kernel
        return (*waits, back)
    nbytes = (MoeSizes.of(ctx).routed + ctx.T_sp) * ctx.h * BF16
    return (*waits, blk.compute(f"{tag}.moe.unpermute", *ctx.mem(nbytes), waits=(back,)))


def _shared_widths(ctx: Ctx) -> tuple[int, int]:
    ffn = ctx.model.shared_ffn // ctx.plan.tp
    return ffn, ffn * (2 if ctx.model.gated else 1)


def _shared_forward(blk: Block, ctx: Ctx, tag: str, ln: int) -> tuple[int, ...]:
    """The shared expert: a dense tensor-parallel MLP (SP all-gather, reduce-scatter)."""
    ffn, up = _shared_widths(ctx)
    gathered_gemm(blk, ctx, f"{tag}.shared.fc1", (ctx.T, up, ctx.h), ln, None)
    blk.compute(f"{tag}.shared.activation", *ctx.mem(ctx.T * (up + ffn) * BF16))
    return _reduced_gemm(blk, ctx, f"{tag}.shared.fc2", (ctx.T, ctx.h, ffn))


def moe_backward(blk: Block, ctx: Ctx, tag: str) -> tuple[int, ...]:
    """Append the MoE MLP's backward; returns what the norm's backward waits for."""
    red, a2a = combine_bwd(blk, ctx, tag)
    back = dispatch_bwd(blk, ctx, tag, experts_bwd(blk, ctx, tag, a2a))
    return (*red, route_bwd(blk, ctx, tag, back))


def combine_bwd(blk: Block, ctx: Ctx, tag: str) -> tuple[tuple[int, ...], int]:
    """The shared expert's backward, the unpermute's and the combine's gradient
    all-to-all: (the shared expert's input-gradient reductions, the all-to-all)."""
    z, h, name = MoeSizes.of(ctx), ctx.h, f"{tag}.moe"
    moe_host.backward(blk, ctx, tag)
    red: tuple[int, ...] = ()
    if ctx.model.shared_ffn:
        ffn, up = _shared_widths(ctx)
        _row_backward(blk, ctx, f"{tag}.shared.fc2", h, ffn)
        blk.compute(f"{tag}.shared.activation_bwd", *ctx.mem(ctx.T * (2 * up + ffn) * BF16))
        red = col_backward(blk, ctx, f"{tag}.shared.fc1", up, h)
    if _flex(ctx):
        grad = blk.last_compute
    else:
        nbytes = (2 * z.routed + ctx.T_sp) * h * BF16
        grad = blk.compute(f"{name}.unpermute_bwd", *ctx.mem(nbytes))
    return red, _exchange(blk, ctx, f"{name}.combine_bwd", z.sent, grad)


def experts_bwd(blk: Block, ctx: Ctx, tag: str, a2a: int) -> int:
    """The local experts' data- and weight-gradient GEMMs after the combine's gradient
    all-to-all `a2a`; returns the last node."""
    z, h, name = MoeSizes.of(ctx), ctx.h, f"{tag}.moe"
    got = _etp(blk, ctx, f"{name}.combine_bwd_all_gather", ALL_GATHER, z.sent, a2a)
    got = _sort(blk, ctx, f"{name}.unsort_bwd", z, got)
    got = _pad(blk, ctx, f"{name}.fp8_unpad_bwd", z, got)
    e = z.local_experts
    _, gather_bwd, slice_bwd = sequential_passes(e)
    got = _sequential_copies(blk, ctx, f"{name}.experts_gather_bwd", z, gather_bwd, got)
    fp8.grad_cast(blk, ctx, f"{name}.fc2.grad", z.received * h)
    if "moe_act" in ctx.plan.selective_modules:  # FC2's input re-computed, not kept
        nbytes = z.received * (z.up + z.ffn) * BF16
        blk.compute(f"{name}.activation.recompute", *ctx.mem(nbytes), waits=(got,))
    grouped_gemm(blk, ctx, f"{name}.fc2.dgrad", (z.per_expert, z.ffn, h), e, waits=(got,))
    grouped_gemm(blk, ctx, f"{name}.fc2.wgrad", (z.ffn, h, z.per_expert), e, wgrad=True)
    blk.compute(f"{name}.activation_bwd", *ctx.mem(z.received * (2 * z.up + z.ffn) * BF16))
    fp8.grad_cast(blk, ctx, f"{name}.fc1.grad", z.received * z.up)
    grouped_gemm(blk, ctx, f"{name}.fc1.dgrad", (z.per_expert, h, z.up), e)
    out = grouped_gemm(blk, ctx, f"{name}.fc1.wgrad", (z.up, h, z.per_expert), e, wgrad=True)
    out = _sequential_copies(blk, ctx, f"{name}.experts_slice_bwd", z, slice_bwd, out)
    out = _sort(blk, ctx, f"{name}.sort_bwd", z, _pad(blk, ctx, f"{name}.fp8_pad_bwd", z, out))
    return _etp(blk, ctx, f"{name}.dispatch_bwd_reduce_scatter", REDUCE_SCATTER, z.sent, out)


def dispatch_bwd(blk: Block, ctx: Ctx, tag: str, out: int) -> int:
    """The dispatch's gradient all-to-alls after the experts' backward `out`: the
    probabilities' (alltoall dispatcher), then the tokens'."""
    rows = MoeSizes.of(ctx).sent
    out = moe_meta.probs_exchange(blk, ctx, f"{tag}.moe.dispatch_probs_bwd", rows, out)
    return _exchange(blk, ctx, f"{tag}.moe.dispatch_bwd", rows, out)


def route_bwd(blk: Block, ctx: Ctx, tag: str, back: int) -> int:
    """The permute's, top-k's and router's backward after the all-to-all `back`."""
    z, m, h, name = MoeSizes.of(ctx), ctx.model, ctx.h, f"{tag}.moe"
    nbytes = (z.routed + ctx.T_sp) * h * BF16
    if not _flex(ctx):
        blk.compute(f"{name}.permute_bwd", *ctx.mem(nbytes), waits=(back,))
    blk.compute(f"{name}.topk_bwd", *ctx.mem(ctx.T_sp * m.experts * FP32 * 3), waits=(back,))
    issued = moe_host.pending_backward(blk, tag)
    blk.compute(f"{name}.router.dgrad", *ctx.gemm(ctx.T_sp, h, m.experts, "bf16"), (issued,))
    return blk.compute(
        f"{name}.router.wgrad", *ctx.gemm(m.experts, h, ctx.T_sp, "bf16", wgrad=True)
    )
