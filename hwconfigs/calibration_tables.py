"""Compute calibration of one GPU: achieved-efficiency curves and fixed overheads.

`calibration/<gpu>.yaml` holds what a roofline needs beyond the datasheet: the fraction
of peak FLOP/s that matmul-like kernels reach by size (FLOPs per kernel), the fraction of
peak HBM bandwidth that memory-bound kernels reach by size (bytes moved), the fixed time
of any kernel (launch ramp, tail), the host-side time of one op when only a host ET is
known (its own time, a launch, and the untraced framework/Python time around it), and PCIe bandwidth for host<->device copies. Curves are `[[size, efficiency], ...]`
interpolated in log(size) (the same table type as network links: `LinkSpec` points).
Every file names its `sources`. Unknown keys are ConfigErrors with a "did you mean".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos.errors import ConfigError
from lumos.hwconfigs.fields import REQUIRED as _REQUIRED
from lumos.hwconfigs.fields import efficiency as _efficiency
from lumos.hwconfigs.fields import fields as _fields
from lumos.hwconfigs.fields import flag as _flag
from lumos.hwconfigs.fields import non_negative as _non_negative
from lumos.hwconfigs.fields import positive as _positive
from lumos.hwconfigs.fields import read_yaml as _read_yaml
from lumos.hwconfigs.fields import text as _text
from lumos.hwconfigs.load import ROOT, shipped_path
from lumos.hwconfigs.schema import EfficiencyPoint, LinkSpec

KIND = "calibration"


@dataclass(slots=True, frozen=True)
class ComputeCalibration:
    """Efficiency curves (as `LinkSpec` tables, bandwidth unused) and overheads of one GPU."""

    gpu: str
    sources: tuple[str, ...]
    matmul_efficiency: tuple[EfficiencyPoint, ...]
    conv_efficiency: tuple[EfficiencyPoint, ...]
    attention_efficiency: tuple[EfficiencyPoint, ...]
    memory_efficiency: tuple[EfficiencyPoint, ...]
    kernel_overhead_ns: float
    reduction_overhead_ns: float
    matmul_overhead_ns: float
    host_op_ns: float
    host_launch_ns: float
    host_gap_ns: float
    pcie_gbps: float
    fp32_matmul_tf32: bool
    fp32_conv_tf32: bool

    def curve(self, points: tuple[EfficiencyPoint, ...]) -> LinkSpec:
        return LinkSpec(1.0, 0.0, points)


def _sources(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where} must be a non-empty list of strings (where numbers come from)")
    return tuple(_text(v, where) for v in value)


_TABLE = {
    "gpu": (_text, _REQUIRED),
    "sources": (_sources, _REQUIRED),
    "matmul_efficiency": (_efficiency, _REQUIRED),
    "conv_efficiency": (_efficiency, _REQUIRED),
    "attention_efficiency": (_efficiency, _REQUIRED),
    "memory_efficiency": (_efficiency, _REQUIRED),
    "kernel_overhead_ns": (_non_negative, _REQUIRED),
    "reduction_overhead_ns": (_non_negative, _REQUIRED),
    "matmul_overhead_ns": (_non_negative, _REQUIRED),
    "host_op_ns": (_non_negative, _REQUIRED),
    "host_launch_ns": (_non_negative, 0.0),
    "host_gap_ns": (_non_negative, 0.0),
    "pcie_gbps": (_positive, _REQUIRED),
    "fp32_matmul_tf32": (_flag, False),
    "fp32_conv_tf32": (_flag, True),
}


def shipped_calibrations() -> list[str]:
    """GPU names that have a shipped calibration file."""
    return sorted(p.stem for p in (ROOT / KIND).glob("*.yaml"))


def load_calibration(gpu_or_path: str | Path) -> ComputeCalibration:
    """The calibration of a GPU by its config name (`h100_sxm`) or a YAML path."""
    text = str(gpu_or_path)
    if isinstance(gpu_or_path, Path) or text.endswith((".yaml", ".yml")) or "/" in text:
        path = Path(gpu_or_path)
        if not path.is_file():
            raise ConfigError(f"{path}: no such calibration file")
    else:
        path = shipped_path(KIND, text)
    return ComputeCalibration(**_fields(_read_yaml(path), _TABLE, str(path)))
