"""The SSD scan's kernels, bytes and rate, each mechanism against its source: the rate is
mamba_ssm's Triton forward measured on an H100 (vLLM PR #27299), TileLang's chunk-scan
kernel a cross-check; the backward's recomputed state passing keeps FP32 states, its
backward passing reads them in FP32 and writes BF16, dB / dC / d(C·B^T) write
`head_splits` FP32 partials; a generated Nemotron-H 56B layer's scan nodes cost their
kernels' bytes at that rate plus the PyTorch ops between them."""

from __future__ import annotations

import math

import pytest

from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload import ParallelPlan, Precision
from lumos.simulator.workload.dims import Ctx
from lumos.simulator.workload.spec import load_model
from lumos.simulator.workload.ssd import (
    SSD_HBM_FRACTION,
    SSD_TRITON_FORWARD,
    SSD_TRITON_SHAPE,
    ScanShape,
    conv_cost,
    forward_kernels,
    forward_torch_ops,
    head_splits,
)
from lumos.simulator.workload.ssd_backward import backward_kernels, backward_torch_ops
from tests.simulator.workload.passes import node_value, stage0_pass

KM = KernelModel.for_gpu(load_system("h100").gpu)
HBM = KM.gpu.hbm_bandwidth_gbps  # bytes per ns
#: Nemotron-H 56B on TP 8, one 8K sequence: 32 local heads of 64, state 256, 1 group, Q 128
NH56B = ScanShape(8192, 64, 32, 64, 256, 1, 128, splits=2)


def _shape(tokens: int, heads: int, p: int, groups: int, n: int, q: int) -> ScanShape:
    return ScanShape(tokens, math.ceil(tokens / q), heads, p, n, groups, q)


def test_ssd_rate_is_the_triton_forward_measured_on_an_h100() -> None:
    """vLLM PR #27299: the five-kernel Triton forward at Granite-4.0-H-Small's mixer (128
    heads of 64, 1 group, state 128, chunk 256), 4K / 8K / 16K tokens at 1.206e7 / 1.262e7 /
    1.292e7 tokens/s: by this count without the z gate (one output, no z read) 0.377 /
    0.395 / 0.404 of 3.35 TB/s, their mean the priced fraction."""
    fractions = []
    for tokens, per_s in SSD_TRITON_FORWARD:
        z = _shape(tokens, *SSD_TRITON_SHAPE)
        nbytes = sum(b for _, b in forward_kernels(z)) - 2 * z.x  # no z read, no out_x
        fractions.append(nbytes / (tokens / per_s * 1e9) / HBM)
    assert fractions == pytest.approx([0.377, 0.395, 0.404], abs=0.001)
    assert sum(fractions) / 3 == pytest.approx(SSD_HBM_FRACTION, abs=0.001)


def test_tilelang_chunk_scan_cross_checks_the_rate() -> None:
    """TileLang's chunk_scan_fwd alone (tile-ai/tilelang benchmark/mamba2 @ 8a5eb569: H800,
    batch 8, 80 heads of 64, 1 group, state 128, chunk 256, seq 8192, 1.278 ms): the scan
    kernel's bytes without the gate reach 0.42 of the same HBM, within 10 % of the Triton
    forward's rate."""
    z = ScanShape(8 * 8192, 8 * 32, 80, 64, 128, 1, 256)
    scan = forward_kernels(z)[-1][1] - 2 * z.x
    fraction = scan / 1.278e6 / HBM
    assert fraction == pytest.approx(0.42, abs=0.01)
    assert fraction / SSD_HBM_FRACTION == pytest.approx(1.0, abs=0.1)


def test_backward_recomputes_the_state_passing_in_fp32() -> None:
    """The forward's passing writes BF16 states (1.5 x the FP32 states' bytes); the
    backward's recomputed one has no output dtype and writes FP32 (2 x)."""
    assert forward_kernels(NH56B)[2][1] == 1.5 * NH56B.states
    assert backward_kernels(NH56B)[3][1] == 2 * NH56B.states


def test_state_passing_backward_reads_fp32_and_writes_bf16() -> None:
    """`_state_passing_bwd` reads the FP32 dstates and states and writes both in BF16 (3 x
    the FP32 states); dx and dB then read the BF16 dstates, dC the BF16 states."""
    bwd = backward_kernels(NH56B)
    assert bwd[6][1] == 3 * NH56B.states
    half = NH56B.states / 2
    z, bc, dt = NH56B.x, NH56B.bc, NH56B.dt
    assert bwd[7][1] == 3 * z + NH56B.cb + half + bc + 3 * dt
    partials = 2 * 2 * bc  # two FP32 partials of B's shape
    assert bwd[8][1] == z + half + bc + 3 * dt + partials  # dB: reads dt, writes ddA_next
    assert bwd[9][1] == z + half + bc + 2 * dt + partials  # dC: writes ddA_prev


@pytest.mark.parametrize(
    ("chunks", "heads", "groups", "splits"),
    [(64, 32, 1, 2), (1, 8, 2, 4), (4096, 32, 1, 1), (64, 64, 8, 1)],
)
def test_head_splits_follow_mamba_ssms_sm_count_rule(
    chunks: int, heads: int, groups: int, splits: int
) -> None:
    """min(ceil(chunks·heads / 132), heads per group) heads a program: the 56B on TP 8 (64
    chunks, 32 heads, 1 group) 16 a program, 2 partials; one chunk of 8 heads in 2 groups
    4 partials; long sequences or few heads a group, 1."""
    assert head_splits(chunks, heads, groups, 132) == splits


def test_partials_are_fp32_and_summed() -> None:
    """dB and dC each write `splits` FP32 partials of B's shape and a `.sum(2)` folds them
    into one FP32 copy; d(C·B^T) likewise with C·B^T's; one split more, more bytes."""
    one = ScanShape(8192, 64, 32, 64, 256, 1, 128, splits=1)
    grown = sum(b for _, b in backward_kernels(NH56B)) - sum(b for _, b in backward_kernels(one))
    assert grown == pytest.approx(2 * 2 * NH56B.bc + NH56B.cb)
    ops, ops_one = backward_torch_ops(NH56B), backward_torch_ops(one)
    assert ops[7] == 3 * 2 * NH56B.bc and ops_one[7] == 2 * 2 * NH56B.bc
    assert ops[9] == 3 * NH56B.cb


def test_generated_56b_layer_scan_costs_its_bytes_at_the_triton_rate() -> None:
    """Nemotron-H 56B, TP 8, one 8K sequence: layer 0's SSD forward node is its five
    kernels' 0.60 GB at 0.392 x 3.35 TB/s plus five launches and A's two element-wise ops,
    0.47 ms; the backward node fifteen kernels' 1.86 GB plus nineteen PyTorch ops, 1.50 ms;
    each within 1 ns of that sum."""
    m = load_model("nemotron-h-56b")
    plan = ParallelPlan(tp=8, seq=8192, sequence_parallel=True, precision=Precision.FP8)
    oh = KM.physics.kernel_overhead_ns
    rate = HBM * SSD_HBM_FRACTION
    fwd = stage0_pass(m, plan, KM, forward=True)
    kernels = forward_kernels(NH56B)
    want = sum(b / rate for _, b in kernels) + 5 * oh
    want += sum(KM.memory_ns(b) for b in forward_torch_ops(NH56B))
    assert node_value(fwd, "layer0.ssd_scan") == pytest.approx(want, abs=1)
    assert sum(b for _, b in kernels) == pytest.approx(0.60e9, rel=0.01)
    assert want == pytest.approx(0.47e6, rel=0.01)
    bwd = stage0_pass(m, plan, KM, forward=False)
    kernels = backward_kernels(NH56B)
    ops = backward_torch_ops(NH56B)
    assert (len(kernels), len(ops)) == (15, 19)
    want = sum(b / rate for _, b in kernels) + 15 * oh + sum(KM.memory_ns(b) for b in ops)
    assert node_value(bwd, "layer0.ssd_scan_bwd") == pytest.approx(want, abs=1)
    assert sum(b for _, b in kernels) == pytest.approx(1.86e9, rel=0.01)
    assert want == pytest.approx(1.50e6, rel=0.01)


def test_conv_backward_adds_its_weight_gradients_zero_fill_and_casts() -> None:
    """causal_conv1d_bwd (Dao-AILab/causal-conv1d csrc/causal_conv1d.cpp) zero-fills an
    FP32 dweight and dbias, the kernel accumulates into them, then both are cast back: four
    small ops of launch time each beside the recomputed forward and the backward kernel
    (2 + 3 BF16 passes over T x the local conv channels, two launches)."""
    m = load_model("nemotron-h-56b")
    plan = ParallelPlan(tp=8, seq=8192, sequence_parallel=True, precision=Precision.FP8)
    ctx = Ctx.make(m, plan, KM)
    assert m.mamba is not None
    channels = m.mamba.conv_dim // 8  # 2,560: x 2,048 + B and C 256 each
    ns, _, nbytes = conv_cost(ctx, m.mamba, backward=True)
    passes = 8192 * channels * 2 * 5
    small = [channels * 4 * 4, channels * 4, channels * 4 * 4 * 1.5, channels * 4 * 1.5]
    oh = KM.physics.kernel_overhead_ns
    want = KM.memory_ns(passes, overhead=False) + 2 * oh
    want += sum(KM.memory_ns(b) for b in small)
    assert ns == pytest.approx(want, abs=1)
    assert nbytes == pytest.approx(passes + sum(small))
    fwd_ns, _, _ = conv_cost(ctx, m.mamba, backward=False)
    assert ns - fwd_ns == pytest.approx(
        KM.memory_ns(3 * passes / 5, overhead=False) + 5 * oh, rel=0.01
    )
