"""The facade's pricing choices: which network pricer and compute cost model a call gets.

`pricer` picks ASTRA-sim's configs when both are given, else the `hw` system's NCCL-like
pricer sized for the job, else none (replay); `cost_model` is the GPU's calibrated
roofline, or none where the GPU has no calibration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lumos.errors import ConfigError


def pricer(
    hw: str | None,
    system_json: str | Path | None,
    network_yml: str | Path | None,
    ranks: int,
) -> Any:
    """The network pricer: ASTRA-sim configs, else the `hw` system, else None."""
    if (system_json is None) != (network_yml is None):
        raise ConfigError("--astra-sim-system and --astra-sim-network go together")
    if system_json is not None and network_yml is not None:
        from lumos.simulator.network.astra import AstraPricer

        return AstraPricer.from_files(str(system_json), str(network_yml))
    if hw is None:
        return None
    from lumos.simulator.network.nccl import pricer_for_job

    return pricer_for_job(hw, ranks)


def cost_model(hw: str | None) -> Any:
    """The compute cost model of the system's GPU (None without `hw`, or uncalibrated)."""
    if hw is None:
        return None
    from lumos.hwconfigs.load import load_system
    from lumos.simulator.costmodel.roofline import CostModel

    try:
        return CostModel.for_gpu(load_system(hw).gpu)
    except ConfigError:
        return None  # no calibration for this GPU: an error only if an ET needs one
