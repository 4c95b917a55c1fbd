"""Mamba-2's SSD chunked scan and causal convolution as the training kernels run them.

Megatron-Core trains the Mamba-2 mixer through mamba_ssm's memory-efficient path
(`MambaMixer._ssm_training` → `mamba_split_conv1d_scan_combined`): the depthwise causal
conv1d over x, B and C (`causal_conv1d_fwd`), then the SSD scan
(`_mamba_chunk_scan_combined_fwd`, mamba_ssm/ops/triton/ssd_combined.py), five Triton
kernels over chunks of Q tokens: the dt softplus and cumulative decay (`_chunk_cumsum_fwd`),
each chunk's final state B^T·x (`_chunk_state_fwd`, FP32 states), the sequential pass of
states from chunk to chunk (`_state_passing_fwd`, written in BF16), the chunk-local C·B^T
(`_bmm_chunk_fwd`, full Q x Q, FP32) and the output (`_chunk_scan_fwd`: the causal
intra-chunk product with x, C times the incoming state, the D skip and the SiLU(z) gate; it
writes the gated output and the ungated one the backward reads). The backward
(`_mamba_chunk_scan_combined_bwd`, `ssd_backward`) recomputes the cumsum, C·B^T, the chunk
states and their passing, then runs the gradient kernels and the PyTorch ops between them;
the conv1d is recomputed before its own backward (the memory-efficient path keeps only the
in_proj output).

FLOPs per kernel are the matmuls' (2 per multiply-add; the intra-chunk products causal,
half the Q x Q square, except C·B^T and its gradient products, computed whole), bytes what
each kernel reads and writes in HBM (BF16 activations, FP32 dt / decay / states / C·B^T).
Each kernel takes max(FLOPs at the tensor peak x the file's fused-attention forward
efficiency, bytes at `SSD_HBM_FRACTION` of the GPU's HBM bandwidth) plus the per-kernel
overhead: the SSD kernels are chunk-local matmul loops like a flash-attention forward (Dao &
Gu 2024, "Transformers are SSMs", §6-7; that efficiency is the kernel file's attention
number, not measured for SSD). At Nemotron-H's shapes (P 64, N 128-256, Q 128) the FP32
states make most kernels memory-bound: the rate that matters is the HBM one, and the chunk
kernels reach less of it than a streaming element-wise kernel (`SSD_HBM_FRACTION`, measured
on the Triton forward). The PyTorch element-wise ops around them (`torch_ops`) take their
bytes at the file's element-wise efficiency, each with its launch overhead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.hybrid_spec import MambaDims

FP32 = 4
#: fraction of peak HBM bandwidth the SSD kernels move their bytes at (this module's count,
#: `ScanShape`): mamba_ssm's Triton SSD forward (the five kernels, vLLM's copy) measured on
#: one H100 by vllm-project/vllm PR #27299 (comment of 2025-10-25, cyang49, "Original"
#: column; Granite-4.0-H-Small's mixer: 128 heads of 64, 1 group, state 128; chunk 256, read
#: from the comment's "matching mamba config (CHUNK_SIZE_FUSED=256)" and the Granite 4.0 H
#: configs' `mamba_chunk_size` 256 — Small's own config.json not read; at chunk 128 the same
#: times would be 0.55-0.59): 4,096 / 8,192 / 16,384 tokens at 1.206e7 /
#: 1.262e7 / 1.292e7 tokens/s, i.e. 0.377 / 0.395 / 0.404 of 3.35 TB/s by this module's
#: forward count without z (no gate, one output): mean 0.392. The kernels Megatron-Core runs
#: (`SSD_TRITON_FORWARD` keeps the points; `test_hybrid_ssd.py` recomputes them). Applied
#: to every SSD kernel, forward and backward: no measurement of the backward kernels was
#: found. Cross-check: TileLang's `chunk_scan_fwd` alone on an H800 (tile-ai/tilelang
#: benchmark/mamba2/README.md @ 8a5eb569, batch 8, 80 heads, seq 8192: 1.278 ms) reaches
#: 0.42 by the same count, the number used before
SSD_HBM_FRACTION = 0.392
#: (tokens, tokens a second) of the Triton SSD forward on one H100 at Granite-4.0-H-Small's
#: mixer shape (heads, head width, groups, state, chunk), vLLM PR #27299 (above)
SSD_TRITON_FORWARD = ((4096, 1.206409e7), (8192, 1.262327e7), (16384, 1.292440e7))
SSD_TRITON_SHAPE = (128, 64, 1, 128, 256)


def head_splits(chunks: int, heads: int, groups: int, sm_count: int) -> int:
    """`nsplits` of mamba_ssm's `_chunk_state_bwd_db`, `_chunk_scan_bwd_dC` and
    `_chunk_scan_bwd_dcb` (ssd_chunk_state.py / ssd_chunk_scan.py): a program takes
    min(ceil(batch·chunks·heads / SMs), heads per group) heads of a group, so the heads of a
    group write ceil(heads per group / that) partial FP32 results, summed after."""
    ratio = heads // groups
    per_program = max(min(math.ceil(chunks * heads / sm_count), ratio), 1)
    return math.ceil(ratio / per_program)


@dataclass(frozen=True, slots=True)
class ScanShape:
    """One rank's scan: `tokens` (b x s), `chunks` (b x ceil(s / Q)), local heads and
    groups (split over TP), head width P, state N, chunk Q; `splits`: how many partial
    FP32 copies the backward's dB, dC and d(C·B^T) kernels write before summing them
    (`head_splits`)."""

    tokens: int
    chunks: int
    heads: int
    head_dim: int
    state: int
    groups: int
    chunk: int
    splits: int = 1

    @classmethod
    def of(cls, ctx: Ctx, m: MambaDims) -> ScanShape:
        t = ctx.plan.tp
        chunks = ctx.b * math.ceil(ctx.s / m.chunk)
        heads, groups = m.heads // t, m.groups // t
        splits = head_splits(chunks, heads, groups, ctx.km.physics.sm_count)
        return cls(ctx.T, chunks, heads, m.head_dim, m.state, groups, m.chunk, splits)

    @property
    def x(self) -> float:
        """Bytes of x (or z, dout, the output): tokens x local d_inner, BF16."""
        return float(self.tokens * self.heads * self.head_dim * BF16)

    @property
    def bc(self) -> float:
        """Bytes of B (or C): tokens x local groups x N, BF16."""
        return float(self.tokens * self.groups * self.state * BF16)

    @property
    def states(self) -> float:
        """Bytes of the chunk states in FP32: chunks x local heads x P x N."""
        return float(self.chunks * self.heads * self.head_dim * self.state * FP32)

    @property
    def cb(self) -> float:
        """Bytes of C·B^T in FP32: tokens x local groups x Q."""
        return float(self.tokens * self.groups * self.chunk * FP32)

    @property
    def dt(self) -> float:
        """Bytes of one FP32 value per token and local head (dt, the cumulative decay)."""
        return float(self.tokens * self.heads * FP32)

    def flops(self) -> tuple[float, float, float]:
        """(a state product: tokens x d_inner x N, the causal intra-chunk product with x:
        tokens x d_inner x Q / 2, C·B^T: tokens x Q x N x groups), 2 FLOPs a multiply-add."""
        inner = self.tokens * self.heads * self.head_dim
        return (
            2.0 * inner * self.state,
            float(inner * self.chunk),
            2.0 * self.tokens * self.chunk * self.state * self.groups,
        )


def forward_kernels(z: ScanShape) -> list[tuple[float, float]]:
    """(FLOPs, bytes) of each forward kernel (module doc): cumsum (BF16 dt in, FP32 dt and
    decay out), chunk states (FP32), state passing (FP32 in, BF16 out: `out_dtype=C.dtype`),
    C·B^T, the chunk scan (reads C·B^T, x, C, the BF16 states, dt, decay and z; writes the
    gated and the ungated output)."""
    state, intra, cb = z.flops()
    return [
        (0.0, z.dt / 2 + 2 * z.dt),
        (state, z.x + z.bc + 2 * z.dt + z.states),
        (0.0, z.states * 1.5),
        (cb, 2 * z.bc + z.cb),
        (intra + state, z.cb + z.x + z.bc + z.states / 2 + 2 * z.dt + z.x + 2 * z.x),
    ]


def forward_torch_ops(z: ScanShape) -> tuple[float, ...]:
    """Bytes of the mixer's PyTorch ops before the scan (megatron/core/ssm/mamba_mixer.py
    `_ssm_training`): A = -exp(A_log), two element-wise kernels over the local heads (FP32
    in and out)."""
    a = float(z.heads * FP32 * 2)
    return (a, a)


def scan_cost(
    ctx: Ctx, kernels: list[tuple[float, float]], torch_ops: tuple[float, ...] = ()
) -> tuple[float, float, float]:
    """(ns, FLOPs, bytes) of the Triton `kernels` back to back, each at the slower of its
    matmuls and its HBM traffic, and of the PyTorch element-wise ops (`torch_ops`, their
    bytes) at the element-wise rate, each kernel with its launch overhead (module doc)."""
    km = ctx.km
    rate = km.tensor_peak_flops_per_ns("bf16") * km.physics.attention_fwd_efficiency
    bandwidth = km.gpu.hbm_bandwidth_gbps * SSD_HBM_FRACTION  # bytes per ns
    ns = sum(max(f / rate, b / bandwidth) for f, b in kernels)
    ns += len(kernels) * km.physics.kernel_overhead_ns
    ns += sum(km.memory_ns(b) for b in torch_ops)
    nbytes = sum(b for _, b in kernels) + sum(torch_ops)
    return ns, sum(f for f, _ in kernels), nbytes


def conv_cost(ctx: Ctx, m: MambaDims, backward: bool) -> tuple[float, float, float]:
    """(ns, FLOPs, bytes) of the depthwise causal conv1d over the local x, B, C channels
    (memory-bound: read and write BF16); backward: its recomputed forward, then the
    backward kernel reading x and the output gradient and writing the input gradient, and
    the four small ops `causal_conv1d_bwd` adds around it (Dao-AILab/causal-conv1d
    csrc/causal_conv1d.cpp: FP32 `zeros_like` for the weight and bias gradients the kernel
    accumulates into, and their casts back to the weights' dtype)."""
    channels = m.conv_dim // ctx.plan.tp
    elems = ctx.T * channels
    flops = 2.0 * elems * m.conv_kernel
    nbytes = float(elems * BF16 * (2 + 3 if backward else 2))
    km = ctx.km
    kernels = 2 if backward else 1
    ns = km.memory_ns(nbytes, overhead=False) + kernels * km.physics.kernel_overhead_ns
    if backward:  # zero the FP32 dweight and dbias, then cast both to BF16
        grads = (channels * m.conv_kernel * FP32, channels * FP32)
        small = [float(b) for b in grads] + [b * 1.5 for b in grads]
        ns += sum(km.memory_ns(b) for b in small)
        nbytes += sum(small)
    return ns, flops * (3 if backward else 1), nbytes
