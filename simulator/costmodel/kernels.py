"""Shape-level kernel times for generated steps: GEMM, flash attention, memory-bound ops.

The operator-level model of fine-grained GPU performance modelling, with the physics a
FLOP-count roofline misses:

* GEMM (M, N, K, dtype): the output is cut into `gemm_tile` tiles, one CTA per SM per
  wave, so a GEMM takes `ceil(tiles / SMs)` waves (wave quantisation); each wave runs
  the main loop at `η(dtype) · K / (K + k0)` of the SMs' tensor peak (`k0`: the
  pipeline fill as an equivalent K). The epilogue streams the output through HBM after
  the main loop: `out_bytes` per element (2 for a BF16 store, 8 when the weight gradient
  accumulates into FP32 main gradients: read + write). Never faster than moving A, B and
  C through HBM.
* Flash attention: 4·B·H·Sq·Skv·D FLOPs forward (½ when causal), 2.5× that backward,
  query tiles of `attention_tile` rows quantised over the SMs, at the forward / backward
  efficiencies.
* Memory-bound kernels (norms, element-wise, casts, optimizer): bytes over
  `memory_efficiency` × HBM bandwidth.

Tensor-core work runs at `sustained_clock_fraction` of the clock the efficiencies were
measured at (a GPU at its power limit in a busy node clocks down; HBM does not). Every
kernel adds `kernel_overhead_ns`. Parameters: `hwconfigs/kernels/<gpu>.yaml`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lumos.errors import ConfigError
from lumos.hwconfigs.kernel_tables import KernelPhysics, kernel_physics_of
from lumos.hwconfigs.schema import GpuSpec

BYTES = {"bf16": 2, "fp8": 1, "fp32": 4}


@dataclass(slots=True, frozen=True)
class KernelModel:
    """Times kernels of given shapes on one GPU. Build with `KernelModel.for_gpu(gpu)`."""

    gpu: GpuSpec
    physics: KernelPhysics

    @classmethod
    def for_gpu(cls, gpu: GpuSpec, physics: KernelPhysics | None = None) -> KernelModel:
        """The kernel model of `gpu` with its shipped physics file (or the one given).

        Raises ConfigError when the GPU has no `hwconfigs/kernels/` file.
        """
        return cls(gpu, physics or kernel_physics_of(gpu.name))

    def tensor_peak_flops_per_ns(self, dtype: str) -> float:
        """Dense tensor-core peak for `dtype` (bf16 or fp8) in FLOP/ns at the sustained clock.

        Raises ConfigError for FP8 on a GPU without FP8 tensor cores.
        """
        clock = self.physics.sustained_clock_fraction
        if dtype == "fp8":
            if not self.gpu.peak_fp8_tflops or self.physics.gemm_efficiency_fp8 is None:
                raise ConfigError(f"{self.gpu.name} has no FP8 tensor cores (or no FP8 efficiency)")
            return self.gpu.peak_fp8_tflops * 1e3 * clock
        return self.gpu.peak_bf16_tflops * 1e3 * clock

    def gemm_efficiency(self, dtype: str) -> float:
        p = self.physics
        if dtype == "fp8" and p.gemm_efficiency_fp8 is not None:
            return p.gemm_efficiency_fp8
        return p.gemm_efficiency_bf16

    def gemm_ns(
        self,
        m: int,
        n: int,
        k: int,
        dtype: str = "bf16",
        batch: int = 1,
        out_bytes: int = 2,
        sms: int | None = None,
    ) -> float:
        """Time of `batch` GEMMs C[m,n] = A[m,k] B[k,n] (inputs in `dtype`; the epilogue
        moves `out_bytes` per output element), on `sms` SMs (default: all; fewer when a
        communication kernel holds the rest)."""
        if m <= 0 or n <= 0 or k <= 0:
            return 0.0
        p = self.physics
        tm, tn = p.gemm_tile
        tiles = batch * math.ceil(m / tm) * math.ceil(n / tn)
        waves = math.ceil(tiles / max(1, min(sms or p.sm_count, p.sm_count)))
        eff = self.gemm_efficiency(dtype) * k / (k + p.gemm_k_overhead)
        per_sm = self.tensor_peak_flops_per_ns(dtype) / p.sm_count
        compute = waves * 2.0 * tm * tn * k / (per_sm * eff)
        epilogue = self.memory_ns(batch * m * n * out_bytes, overhead=False)
        nbytes = batch * ((m * k + k * n) * BYTES.get(dtype, 2) + m * n * out_bytes)
        t = max(compute + epilogue, self.memory_ns(nbytes, overhead=False))
        return t + p.kernel_overhead_ns

    def attention_ns(
        self,
        batch_heads: int,
        sq: int,
        skv: int,
        head_dim: int,
        causal: bool = True,
        backward: bool = False,
        relative_efficiency: float = 1.0,
    ) -> float:
        """Flash attention over `batch_heads` (batch x local heads) query blocks;
        `relative_efficiency` scales the file's fused-attention efficiency for another
        attention kernel (e.g. FlashAttention-2 under PyTorch SDPA)."""
        if batch_heads <= 0 or sq <= 0 or skv <= 0:
            return 0.0
        p = self.physics
        tiles = batch_heads * math.ceil(sq / p.attention_tile)
        waves = math.ceil(tiles / p.sm_count)
        per_tile = 4.0 * p.attention_tile * skv * head_dim * (0.5 if causal else 1.0)
        eff = p.attention_bwd_efficiency if backward else p.attention_fwd_efficiency
        eff *= relative_efficiency
        flops = per_tile * (2.5 if backward else 1.0)
        per_sm = self.tensor_peak_flops_per_ns("bf16") / p.sm_count
        return waves * flops / (per_sm * eff) + p.kernel_overhead_ns

    def attention_flops(
        self, batch_heads: int, sq: int, skv: int, head_dim: int, causal: bool, backward: bool
    ) -> float:
        """FLOPs of the attention kernel above (for `num_ops`)."""
        f = 4.0 * batch_heads * sq * skv * head_dim * (0.5 if causal else 1.0)
        return f * (2.5 if backward else 1.0)

    def memory_ns(self, nbytes: float, overhead: bool = True) -> float:
        """A memory-bound kernel moving `nbytes` through HBM."""
        t = nbytes / (self.gpu.hbm_bandwidth_gbps * self.physics.memory_efficiency)
        return t + (self.physics.kernel_overhead_ns if overhead else 0.0)
