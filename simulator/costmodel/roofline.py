"""Compute cost model: the time of one op on one GPU from its FLOPs and bytes.

A roofline with achieved-efficiency curves (the operator-level method of fine-grained GPU
performance models): `time = max(flops / (peak(dtype)·η_c(flops)), bytes / (HBM·η_m(bytes)))
+ kernel overhead(class)`, where η_c depends on the op class (matmul, convolution, attention) and
η_m on the bytes moved; both curves and the overheads come from
`hwconfigs/calibration_tables/<gpu>.yaml`. Host<->device copies run at PCIe bandwidth. Ops with
no kernel (views, allocations) cost nothing on the GPU. `host_ns` is the CPU time of one
op when only a host ET is known (dispatcher + launch).
"""

from __future__ import annotations

from dataclasses import dataclass

from lumos.converters.ops.args import DType
from lumos.converters.ops.flops import CostKind, OpCost
from lumos.errors import ConfigError
from lumos.hwconfigs.calibration_tables import ComputeCalibration, load_calibration
from lumos.hwconfigs.schema import GpuSpec, LinkSpec


@dataclass(slots=True, frozen=True)
class CostModel:
    """Prices `OpCost`s on one GPU. Build with `CostModel.for_gpu(gpu_spec)`."""

    gpu: GpuSpec
    calibration: ComputeCalibration
    matmul: LinkSpec
    conv: LinkSpec
    attention: LinkSpec
    memory: LinkSpec

    @classmethod
    def for_gpu(cls, gpu: GpuSpec, calibration: ComputeCalibration | None = None) -> CostModel:
        """The cost model of `gpu` with its shipped calibration (or the one given).

        Raises ConfigError when the GPU has no calibration file.
        """
        cal = calibration or load_calibration(gpu.name)
        if cal.gpu != gpu.name and calibration is None:
            raise ConfigError(f"calibration file for {gpu.name!r} names gpu {cal.gpu!r}")
        return cls(
            gpu,
            cal,
            cal.curve(cal.matmul_efficiency),
            cal.curve(cal.conv_efficiency),
            cal.curve(cal.attention_efficiency),
            cal.curve(cal.memory_efficiency),
        )

    def peak_flops_per_ns(self, dtype: DType, kind: CostKind) -> float:
        """Peak FLOP/ns for math of `dtype` in an op of `kind` (tensor cores where used)."""
        g, cal = self.gpu, self.calibration
        if kind in (CostKind.MATMUL, CostKind.CONV, CostKind.ATTENTION):
            tf32 = cal.fp32_conv_tf32 if kind is CostKind.CONV else cal.fp32_matmul_tf32
            table = {
                DType.FP16: g.peak_fp16_tflops,
                DType.BF16: g.peak_bf16_tflops,
                DType.FP8: g.peak_fp8_tflops or g.peak_fp16_tflops,
                DType.TF32: g.peak_tf32_tflops,
                DType.FP32: g.peak_tf32_tflops if tf32 else g.peak_fp32_tflops,
                DType.FP64: g.peak_fp64_tflops,
            }
            return table.get(dtype, g.peak_fp32_tflops) * 1e3
        return g.peak_fp32_tflops * 1e3  # CUDA cores

    def compute_ns(self, cost: OpCost) -> float:
        """FLOP-bound time (no overhead)."""
        if cost.flops <= 0:
            return 0.0
        curve = {
            CostKind.MATMUL: self.matmul,
            CostKind.CONV: self.conv,
            CostKind.ATTENTION: self.attention,
        }.get(cost.kind)
        eff = curve.efficiency_at(cost.flops) if curve is not None else 1.0
        return cost.flops / (self.peak_flops_per_ns(cost.dtype, cost.kind) * eff)

    def memory_ns(self, cost: OpCost) -> float:
        """Bandwidth-bound time (no overhead): HBM, or PCIe for host<->device copies."""
        if cost.bytes <= 0:
            return 0.0
        if cost.kind is CostKind.TRANSFER:
            return cost.bytes / 2 / self.calibration.pcie_gbps  # bytes counted on both sides
        return cost.bytes / (self.gpu.hbm_bandwidth_gbps * self.memory.efficiency_at(cost.bytes))

    def time_ns(self, cost: OpCost) -> int:
        """GPU time of one op in ns: roofline + fixed kernel overhead; 0 without a kernel."""
        if cost.kind is CostKind.NO_KERNEL or (cost.flops <= 0 and cost.bytes <= 0):
            return 0
        t = max(self.compute_ns(cost), self.memory_ns(cost))
        return round(t + self.overhead_ns(cost.kind))

    def overhead_ns(self, kind: CostKind) -> float:
        """Fixed time of one kernel of this class (its duration when it does no work)."""
        cal = self.calibration
        if kind in (CostKind.MATMUL, CostKind.CONV, CostKind.ATTENTION):
            return cal.matmul_overhead_ns
        if kind is CostKind.REDUCTION:
            return cal.reduction_overhead_ns
        return cal.kernel_overhead_ns

    def host_ns(self, cost: OpCost | None, leaf_ops: int = 1) -> int:
        """CPU time of one op seen only in a host ET: dispatch and the untraced
        framework/Python time (`host_gap_ns`) of each of the `leaf_ops` host-ET ops it
        stands for (both calibrated per leaf op), plus a launch if it has a kernel."""
        cal = self.calibration
        launches = cost is not None and cost.kind is not CostKind.NO_KERNEL
        per_leaf = cal.host_op_ns + cal.host_gap_ns
        return round(per_leaf * leaf_ops + (cal.host_launch_ns if launches else 0.0))
