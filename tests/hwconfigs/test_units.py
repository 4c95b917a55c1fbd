"""Hardware figures given in other units are refused when the config is read (red-team
round): a peak of 9.894e14 (FLOP/s for TFLOP/s) estimated Llama 3.1 8B at 0.106 s a step
and MFU 0.000; 0.9894 (PFLOP/s) at 91 s and MFU 0.694, a plausible-looking number; HBM at
3.35 (TB/s) 30 s; 80e9 GB of HBM fitted everything; a latency of 6e-7 (seconds) was 0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lumos.errors import ConfigError
from lumos.hwconfigs.load import load_system, shipped_names
from tests.cli.test_hostile_estimate import system


@pytest.mark.parametrize(
    "change",
    [
        {"gpu__peak_bf16_tflops": 9.894e14},  # FLOP/s
        {"gpu__peak_bf16_tflops": 0.9894},  # PFLOP/s
        {"gpu__peak_fp8_tflops": 1.9789e15},
        {"gpu__hbm_bandwidth_gbps": 3.35},  # TB/s
        {"gpu__hbm_capacity_gb": 80e9},  # bytes
        {"nvlink__bandwidth_gbps": 0.45},  # TB/s
        {"fabric__nic_line_rate_gbit_per_s": 4e11},  # bit/s
        {"nvlink__latency_ns": 6e-7},  # seconds
        {"fabric__nic_latency_ns": 0.5},  # microseconds
        {"node__collective_launch_ns": 3e12},  # picoseconds of a 3 s launch: nonsense
    ],
    ids=lambda c: f"{next(iter(c))}={next(iter(c.values()))}",
)
def test_hardware_figures_in_other_units_are_refused(
    tmp_path: Path, change: dict[str, Any]
) -> None:
    key = next(iter(change)).split("__")[1]
    with pytest.raises(ConfigError, match=rf"{key} is .*, outside the .* is it in other units"):
        load_system(system(tmp_path, **change))


def test_zero_latency_and_every_shipped_system_still_load(tmp_path: Path) -> None:
    """0 is an ideal link, not a unit mistake; the shipped configs sit inside the bands."""
    ideal = load_system(system(tmp_path, nvlink__latency_ns=0, fabric__nic_latency_ns=0))
    assert ideal.node.nvlink.latency_ns == 0
    for name in shipped_names():
        assert load_system(name).gpu.peak_bf16_tflops >= 1


def test_nic_rate_in_gigabytes_is_warned_with_both_readings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A NIC line rate written in GB/s where the key is Gb/s is 8x slow and inside the Gb/s
    band (was priced silently). 50 on an H100 node reads as 50 Gb/s (1/72 of its NVLink a
    GPU, past the 1/48 no reference design is below) or 400 Gb/s (NDR) written in GB/s;
    12.5 is 100 Gb/s in GB/s and no NIC's line rate. Both load (50 GbE NICs exist) with a
    warning naming the value and both readings; real rates and shipped systems stay quiet."""
    with caplog.at_level("WARNING", logger="lumos"):
        spec = load_system(system(tmp_path, fabric__nic_line_rate_gbit_per_s=50))
    assert spec.fabric.nic_line_rate_gbit_per_s == 50
    (msg,) = [r.getMessage() for r in caplog.records]
    assert "nic_line_rate_gbit_per_s 50" in msg and "50 Gb/s" in msg and "400 Gb/s" in msg
    caplog.clear()
    with caplog.at_level("WARNING", logger="lumos"):
        load_system(system(tmp_path, fabric__nic_line_rate_gbit_per_s=12.5))
    assert "100 Gb/s" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="lumos"):
        for name in shipped_names():
            load_system(name)
        load_system(system(tmp_path, fabric__nic_line_rate_gbit_per_s=200))  # HDR: 1/18
        load_system(system(tmp_path, fabric__nic_line_rate_gbit_per_s=333))  # not a product
    assert not caplog.records, caplog.text
