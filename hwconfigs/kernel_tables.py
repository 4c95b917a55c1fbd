"""Kernel-level physics of one GPU for trace-free estimates: `kernels/<gpu>.yaml`.

A few interpretable parameters, each with its source in the file: SM count and the GEMM
output tile (wave quantisation), the fraction of tensor-core peak a GEMM main loop reaches
per dtype, the prologue/epilogue cost of a GEMM as an equivalent K, flash-attention
forward/backward efficiencies and query tile, the achieved fraction of HBM bandwidth for
memory-bound kernels, a fixed per-kernel overhead, the per-GPU workspace memory, and
the SM clock a GPU sustains under multi-GPU training load as a fraction of the clock the
efficiencies were measured at (tensor-core work slows with it; HBM traffic does not), and
the host (CPU) time of one eager view op and one eager copy op, for framework code that
issues one op per peer, and the host time of one per-expert GEMM of a grouped GEMM that
Transformer Engine issues as a loop of cuBLASLt calls (0: not modelled), and the SMs an
NCCL collective kernel holds with the bus bandwidth each of them moves over NVLink (what
FSDP's collectives take from the compute beside them, `workload/nccl_share`; 0: not
modelled). Unknown keys are ConfigErrors with a "did you mean".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos.errors import ConfigError
from lumos.hwconfigs.fields import REQUIRED, fields, non_negative, positive, read_yaml, text
from lumos.hwconfigs.load import ROOT, shipped_path

KIND = "kernels"


@dataclass(slots=True, frozen=True)
class KernelPhysics:
    """Parameters of the GEMM / attention / memory-bound kernel models of one GPU."""

    gpu: str
    sources: tuple[str, ...]
    sm_count: int
    gemm_tile: tuple[int, int]
    gemm_efficiency_bf16: float
    gemm_k_overhead: float
    attention_tile: int
    attention_fwd_efficiency: float
    attention_bwd_efficiency: float
    memory_efficiency: float
    kernel_overhead_ns: float
    workspace_gb: float
    gemm_efficiency_fp8: float | None = None
    sustained_clock_fraction: float = 1.0
    clock_spread: float = 0.0
    clock_reference_gpus: int = 1
    host_view_ns: float = 0.0
    host_copy_ns: float = 0.0
    grouped_gemm_expert_ns: float = 0.0
    host_torch_op_ns: float = 0.0
    host_te_module_ns: float = 0.0
    host_te_module_bwd_ns: float = 0.0
    nccl_ctas: int = 0
    nccl_cta_gbps: float = 0.0


def _sources(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where} must be a non-empty list of strings (where numbers come from)")
    return tuple(text(v, where) for v in value)


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{where} must be a positive integer, got {value!r}")
    return value


def _tile(value: Any, where: str) -> tuple[int, int]:
    if not isinstance(value, list) or len(value) != 2:
        raise ConfigError(f"{where} must be [rows, cols], got {value!r}")
    return (_count(value[0], where), _count(value[1], where))


def _fraction(value: Any, where: str) -> float:
    v = positive(value, where)
    if v > 1:
        raise ConfigError(f"{where} is a fraction of peak (0 < x <= 1), got {value!r}")
    return v


def _spread(value: Any, where: str) -> float:
    v = non_negative(value, where)
    if v >= 0.2:
        raise ConfigError(f"{where} is a relative standard deviation (0 <= x < 0.2), got {value!r}")
    return v


_TABLE = {
    "gpu": (text, REQUIRED),
    "sources": (_sources, REQUIRED),
    "sm_count": (_count, REQUIRED),
    "gemm_tile": (_tile, REQUIRED),
    "gemm_efficiency_bf16": (_fraction, REQUIRED),
    "gemm_efficiency_fp8": (_fraction, None),
    "gemm_k_overhead": (non_negative, 0.0),
    "attention_tile": (_count, 128),
    "attention_fwd_efficiency": (_fraction, REQUIRED),
    "attention_bwd_efficiency": (_fraction, REQUIRED),
    "memory_efficiency": (_fraction, REQUIRED),
    "kernel_overhead_ns": (non_negative, 0.0),
    "workspace_gb": (non_negative, 0.0),
    "sustained_clock_fraction": (_fraction, 1.0),
    "clock_spread": (_spread, 0.0),
    "clock_reference_gpus": (_count, 1),
    "host_view_ns": (non_negative, 0.0),
    "host_copy_ns": (non_negative, 0.0),
    "grouped_gemm_expert_ns": (non_negative, 0.0),
    "host_torch_op_ns": (non_negative, 0.0),
    "host_te_module_ns": (non_negative, 0.0),
    "host_te_module_bwd_ns": (non_negative, 0.0),
    "nccl_ctas": (lambda v, w: 0 if v == 0 else _count(v, w), 0),
    "nccl_cta_gbps": (non_negative, 0.0),
}


def shipped_kernel_tables() -> list[str]:
    """GPU names that have a shipped kernel-physics file."""
    return sorted(p.stem for p in (ROOT / KIND).glob("*.yaml"))


def kernel_physics_of(gpu: str) -> KernelPhysics:
    """The shipped kernel physics of the GPU named `gpu` (a hardware config's GPU `name`,
    never read as a path: a GPU called `../x` or `x.yaml` reads no other file).

    Raises ConfigError naming the GPU and the GPUs that have a table when it has none.
    """
    if gpu not in shipped_kernel_tables():
        have = ", ".join(shipped_kernel_tables())
        raise ConfigError(
            f"GPU {gpu!r} has no kernel-physics table (hwconfigs/kernels/); trace-free "
            f"estimates need one: shipped for {have} (simulate and whatif work without)"
        )
    return load_kernel_physics(gpu)


def load_kernel_physics(gpu_or_path: str | Path) -> KernelPhysics:
    """The kernel physics of a GPU by config name (`h100_sxm`) or a YAML path.

    Raises ConfigError when there is no such file or a value is bad.
    """
    name = str(gpu_or_path)
    if isinstance(gpu_or_path, Path) or name.endswith((".yaml", ".yml")) or "/" in name:
        path = Path(gpu_or_path)
        if not path.is_file():
            raise ConfigError(f"{path}: no such kernel-physics file")
    else:
        path = shipped_path(KIND, name)
    return KernelPhysics(**fields(read_yaml(path), _TABLE, str(path)))
