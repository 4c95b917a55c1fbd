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
(`_mamba_chunk_scan_combined_bwd`) recomputes the cumsum, C·B^T, the chunk states and their
passing, then runs the gradient kernels (dz, dstates, their backward passing, dx with ddt,
dB, dC, d(C·B^T) and its two products, the decay gradient); the conv1d is recomputed
before its own backward (the memory-efficient path keeps only the in_proj output).

FLOPs per kernel are the matmuls' (2 per multiply-add; the intra-chunk products causal,
half the Q x Q square, except C·B^T and its gradient products, computed whole), bytes what
each kernel reads and writes in HBM (BF16 activations, FP32 dt / decay / states / C·B^T).
Each kernel takes max(FLOPs at the tensor peak x the file's fused-attention forward
efficiency, bytes at `SSD_HBM_FRACTION` of the GPU's HBM bandwidth) plus the per-kernel
overhead: the SSD kernels are chunk-local matmul loops like a flash-attention forward (Dao &
Gu 2024, "Transformers are SSMs", §6-7; that efficiency is the kernel file's attention
number, not measured for SSD). At Nemotron-H's shapes (P 64, N 128-256, Q 128) the FP32
states make most kernels memory-bound: the rate that matters is the HBM one, and the chunk
kernels reach less of it than a streaming element-wise kernel (`SSD_HBM_FRACTION`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.hybrid_spec import MambaDims

FP32 = 4
#: fraction of peak HBM bandwidth a chunked-scan kernel moves its bytes at: TileLang's
#: Mamba-2 `chunk_scan_fwd` benchmark on an H800 SXM (3.35 TB/s HBM3, the H100's memory),
#: batch 8, 80 heads of 64, 1 group, d_state 128, chunk 256, seq 8192: 1.278 ms
#: (tile-ai/tilelang benchmark/mamba2/README.md @ 8a5eb569); the kernel reads x, C, C·B^T,
#: the BF16 chunk states, dt and the decay and writes the output, 1.80 GB by this module's
#: count (`ScanShape`) → 1.41 TB/s, 0.42 of 3.35. Its FLOPs at the attention rate would take
#: 0.4 ms: the kernel is bandwidth-bound, below half the peak. TileLang's kernel, which its authors measure
#: against mamba_ssm's Triton one, not the Triton kernels Megatron-Core runs: an upper bound
#: on their speed. Applied to every SSD kernel, forward and backward (no other measured)
SSD_HBM_FRACTION = 0.42


@dataclass(frozen=True, slots=True)
class ScanShape:
    """One rank's scan: `tokens` (b x s), `chunks` (b x ceil(s / Q)), local heads and
    groups (split over TP), head width P, state N, chunk Q."""

    tokens: int
    chunks: int
    heads: int
    head_dim: int
    state: int
    groups: int
    chunk: int

    @classmethod
    def of(cls, ctx: Ctx, m: MambaDims) -> ScanShape:
        t = ctx.plan.tp
        chunks = ctx.b * math.ceil(ctx.s / m.chunk)
        return cls(ctx.T, chunks, m.heads // t, m.head_dim, m.state, m.groups // t, m.chunk)

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


def _recomputed(z: ScanShape) -> list[tuple[float, float]]:
    """(FLOPs, bytes) of the forward's first four kernels: cumsum, chunk states, state
    passing (FP32 in, BF16 out), C·B^T."""
    state, _, cb = z.flops()
    return [
        (0.0, z.dt / 2 + 2 * z.dt),
        (state, z.x + z.bc + 2 * z.dt + z.states),
        (0.0, z.states * 1.5),
        (cb, 2 * z.bc + z.cb),
    ]


def forward_kernels(z: ScanShape) -> list[tuple[float, float]]:
    """(FLOPs, bytes) of each forward kernel (module doc)."""
    state, intra, _ = z.flops()
    scan = (intra + state, z.cb + z.x + z.bc + z.states / 2 + 2 * z.dt + z.x + 2 * z.x)
    return [*_recomputed(z), scan]


def backward_kernels(z: ScanShape) -> list[tuple[float, float]]:
    """(FLOPs, bytes) of each backward kernel: the recomputed four, then dz (reads x, z, the
    output and dout; writes dz and the ungated dout), dstates (C x dout), the states'
    backward passing, dx (C·B^T x dout causal, B x dstates), dB (x x dstates), dC (dout x
    states), d(C·B^T) (dout x x, causal), its two products with B and C, the decay
    gradient (causal), the dt / A / dt_bias gradients."""
    state, intra, cb = z.flops()
    return [
        *_recomputed(z),
        (0.0, 6 * z.x),
        (state, z.bc + z.x + z.dt + z.states),
        (0.0, 2.5 * z.states),
        (intra + state, 3 * z.x + z.cb + z.states + z.bc + 2 * z.dt),
        (state, z.x + z.states + z.bc + 2 * z.dt),
        (state, z.states / 2 + z.x + z.bc + z.dt),
        (intra, 2 * z.x + z.cb),
        (cb, z.cb + 2 * z.bc),
        (cb, z.cb + 2 * z.bc),
        (intra, 2 * z.x + z.cb + z.dt),
        (0.0, 3 * z.dt),
    ]


def scan_cost(ctx: Ctx, kernels: list[tuple[float, float]]) -> tuple[float, float, float]:
    """(ns, FLOPs, bytes) of `kernels` back to back, each at the slower of its matmuls and
    its HBM traffic, plus its launch overhead (module doc)."""
    km = ctx.km
    rate = km.tensor_peak_flops_per_ns("bf16") * km.physics.attention_fwd_efficiency
    bandwidth = km.gpu.hbm_bandwidth_gbps * SSD_HBM_FRACTION  # bytes per ns
    ns = sum(max(f / rate, b / bandwidth) for f, b in kernels)
    ns += len(kernels) * km.physics.kernel_overhead_ns
    return ns, sum(f for f, _ in kernels), sum(b for _, b in kernels)


def conv_cost(ctx: Ctx, m: MambaDims, backward: bool) -> tuple[float, float, float]:
    """(ns, FLOPs, bytes) of the depthwise causal conv1d over the local x, B, C channels
    (memory-bound: read and write BF16); backward: its recomputed forward, then the
    backward kernel reading x and the output gradient and writing the input gradient."""
    elems = ctx.T * m.conv_dim // ctx.plan.tp
    flops = 2.0 * elems * m.conv_kernel
    nbytes = elems * BF16 * (2 + 3 if backward else 2)
    kernels = 2 if backward else 1
    ns = ctx.km.memory_ns(nbytes, overhead=False) + kernels * ctx.km.physics.kernel_overhead_ns
    return ns, flops * (3 if backward else 1), float(nbytes)
