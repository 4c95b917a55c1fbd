"""A Mamba-2 layer's kernels and tensor-parallel collectives, forward and backward, as
Megatron-Core's `MambaLayer` runs its `MambaMixer` in training.

On one TP rank (megatron/core/ssm/mamba_mixer.py, `forward` → `_ssm_training`; heads and
groups split over TP, the input a sequence-parallel shard): the layer's RMSNorm (fused into
in_proj, a `TELayerNormColumnParallelLinear`) → [all-gather] → in_proj GEMM [T, h] →
[T, (2·d_inner + 2·G·N + nheads) / tp] (z, x, B, C, dt) → the causal conv1d over x, B, C
and the SSD scan with its SiLU(z) gate (`ssd`) → the grouped RMSNorm over each group's
d_inner / G channels (`ExtendedRMSNorm`, a memory-bound pass) → out_proj GEMM [T, d_inner
/ tp] → [T, h] (`TERowParallelLinear`) → [reduce-scatter] → residual add. The mixer uses
the MLP's userbuffers (`tp_comm_buffer_name` "fc1" / "fc2", `userbuffers.BUFFER_OF`), so
TP-comm overlap splits in_proj and out_proj as it splits FC1 and FC2. With a micro-batch
above 1 the mixer's `rearrange(... "l b d -> b l d").contiguous()` copies the in_proj output
before the scan and the scan output after it (with one sequence the copy is a view).
Backward mirrors it: out_proj's data and weight gradients, the norm's backward, the scan's
(`ssd_backward`), the conv's (recomputed first), in_proj's gradients with the input
re-gather and the gradient reduce-scatter beside them, the fused norm's backward.
"""

from __future__ import annotations

from lumos.simulator.workload import elementwise as ew
from lumos.simulator.workload.block import Block
from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.hybrid_spec import MambaDims
from lumos.simulator.workload.layer import (
    _cast,
    _reduced_gemm,
    _row_backward,
    col_backward,
    gathered_gemm,
)
from lumos.simulator.workload.ssd import (
    ScanShape,
    conv_cost,
    forward_kernels,
    forward_torch_ops,
    scan_cost,
)
from lumos.simulator.workload.ssd_backward import backward_kernels, backward_torch_ops


def _dims(ctx: Ctx) -> MambaDims:
    m = ctx.model.mamba
    assert m is not None, "a Mamba layer needs the model's mixer shape"
    return m


def _widths(ctx: Ctx) -> tuple[int, int]:
    """(local in_proj output width, local d_inner)."""
    m, t = _dims(ctx), ctx.plan.tp
    return m.in_proj_width // t, m.inner // t


def _copy(blk: Block, ctx: Ctx, name: str, width: int) -> None:
    """The mixer's layout copy of a [T, width] BF16 tensor (read and write), with more than
    one sequence in the micro-batch (module doc)."""
    if ctx.b > 1:
        blk.compute(name, *ctx.mem(ctx.T * width * BF16 * 2))


def mamba_forward(blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...] = ()) -> int:
    """Append one Mamba-2 layer's forward (module doc); returns its residual add."""
    T, h = ctx.T, ctx.h
    in_w, inner = _widths(ctx)
    ln = ew.norm(blk, ctx, f"{tag}.norm", waits=waits)
    gathered_gemm(blk, ctx, f"{tag}.in_proj", (T, in_w, h), ln, None)
    _copy(blk, ctx, f"{tag}.in_proj_layout", in_w)
    blk.compute(f"{tag}.conv1d", *conv_cost(ctx, _dims(ctx), backward=False))
    shape = ScanShape.of(ctx, _dims(ctx))
    scan = scan_cost(ctx, forward_kernels(shape), forward_torch_ops(shape))
    blk.compute(f"{tag}.ssd_scan", *scan)
    _copy(blk, ctx, f"{tag}.scan_layout", inner)
    blk.compute(f"{tag}.mixer_norm", *ctx.mem(T * inner * BF16 * 2))
    _cast(blk, ctx, f"{tag}.out_proj", T * inner)
    rs = _reduced_gemm(blk, ctx, f"{tag}.out_proj", (T, h, inner))
    return blk.compute(f"{tag}.residual", *ctx.mem(ctx.T_sp * h * BF16 * 3), waits=rs)


def mamba_backward(blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...] = ()) -> int:
    """Append one Mamba-2 layer's backward (after its recomputed forward under full
    recompute, which the caller runs); returns the fused norm's backward."""
    T, h = ctx.T, ctx.h
    in_w, inner = _widths(ctx)
    blk.compute(f"{tag}.residual_bwd", *ctx.mem(ctx.T_sp * h * BF16 * 2), waits=waits)
    _row_backward(blk, ctx, f"{tag}.out_proj", h, inner)
    blk.compute(f"{tag}.mixer_norm_bwd", *ctx.mem(T * inner * BF16 * 3))
    _copy(blk, ctx, f"{tag}.scan_layout_bwd", inner)
    shape = ScanShape.of(ctx, _dims(ctx))
    scan = scan_cost(ctx, backward_kernels(shape), backward_torch_ops(shape))
    blk.compute(f"{tag}.ssd_scan_bwd", *scan)
    blk.compute(f"{tag}.conv1d_bwd", *conv_cost(ctx, _dims(ctx), backward=True))
    _copy(blk, ctx, f"{tag}.in_proj_layout_bwd", in_w)
    if "layernorm" in ctx.plan.selective_modules:  # the norm's output re-computed
        ew.norm(blk, ctx, f"{tag}.norm.recompute")
    red = col_backward(blk, ctx, f"{tag}.in_proj", in_w, h)
    return ew.norm(blk, ctx, f"{tag}.norm_bwd", backward=True, waits=red)


def mamba_activation_bytes(ctx: Ctx, linear_input: int, norm_output: int) -> float:
    """Bytes one Mamba-2 layer keeps for its backward without recomputation: its input,
    the fused norm's output (`norm_output`, as in_proj keeps it), the in_proj output the
    memory-efficient scan saves (`MambaSplitConv1dScanCombinedFn`: zxbcdt), the scan's
    ungated output (out_x), the grouped norm's input and out_proj's input (`linear_input`
    bytes an element: FP8 under Transformer Engine's FP8)."""
    in_w, inner = _widths(ctx)
    x = ctx.T_sp * ctx.h * BF16
    kept = ctx.T * (in_w * BF16 + 2 * inner * BF16 + inner * linear_input)
    return float(x + norm_output + kept)
