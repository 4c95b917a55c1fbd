"""A synchronous step runs at its slowest GPU: the expected slowest of N spreads with N."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lumos.errors import ConfigError
from lumos.hwconfigs.kernel_tables import load_kernel_physics
from lumos.hwconfigs.load import load_gpu
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.costmodel.stragglers import (
    expected_max_normal,
    slowest_gpu,
    slowest_gpu_fraction,
)
from lumos.simulator.workload import ParallelPlan, estimate


@pytest.mark.parametrize(
    ("n", "exact"),
    [(1, 0.0), (2, 0.5642), (3, 0.8463), (8, 1.4236), (100, 2.5076), (1000, 3.2414)],
)
def test_expected_slowest_of_n_normal_draws(n: int, exact: float) -> None:
    """Tabulated expected maxima of n standard normals (Harter 1961): 1/sqrt(pi) for two."""
    assert expected_max_normal(n) == pytest.approx(exact, abs=2e-4)


def test_slowest_gpu_slows_tensor_work_but_not_hbm_traffic() -> None:
    gpu = load_gpu("h100_sxm")
    mean = KernelModel.for_gpu(gpu)
    slow = KernelModel(gpu, slowest_gpu(mean.physics, 1024))
    fraction = slowest_gpu_fraction(mean.physics, 1024)
    spread, reference = mean.physics.clock_spread, mean.physics.clock_reference_gpus
    assert reference == 8  # the shipped clock is a busy node's
    assert fraction == pytest.approx((1 - spread * 3.2) / (1 - spread * 1.42), abs=0.002)
    overhead = mean.physics.kernel_overhead_ns
    big = 16384
    ratio = (slow.gemm_ns(big, big, big) - overhead) / (mean.gemm_ns(big, big, big) - overhead)
    assert ratio == pytest.approx(1 / fraction, rel=0.01)
    assert slow.memory_ns(1 << 30) == mean.memory_ns(1 << 30)
    assert slowest_gpu(mean.physics, 8) is mean.physics
    one = slowest_gpu(mean.physics, 1)  # one GPU waits for no slower one
    assert one.sustained_clock_fraction > mean.physics.sustained_clock_fraction


def test_weak_scaling_slows_with_the_slowest_of_more_gpus() -> None:
    """Same work per GPU on 8 and 2,048 GPUs: the bigger job waits for a slower slowest GPU
    (published weak-scaling tables lose 1.5-5 % over such a range; one mean GPU loses ~0)."""
    physics = load_kernel_physics("h100_sxm")
    flat = dataclasses.replace(physics, clock_spread=0.0)
    plan = ParallelPlan(tp=1, dp=8, mbs=1, gbs=8, seq=4096)
    big = dataclasses.replace(plan, dp=2048, gbs=2048)

    def ratio(p: object) -> float:
        small_s = estimate("llama3-8b", plan, "h100", physics=p).iteration_time_s  # type: ignore[arg-type]
        big_s = estimate("llama3-8b", big, "h100", physics=p).iteration_time_s  # type: ignore[arg-type]
        return big_s / small_s

    without, with_spread = ratio(flat), ratio(physics)
    gap = slowest_gpu_fraction(physics, 8) / slowest_gpu_fraction(physics, 2048)
    assert with_spread / without == pytest.approx(gap, abs=0.01)
    assert with_spread / without > 1.015
    result = estimate("llama3-8b", big, "h100")
    assert any("slowest GPU" in a and "2,048" in a for a in result.assumptions)


def test_clock_spread_is_a_relative_deviation(tmp_path: Path) -> None:
    from lumos.hwconfigs.kernel_tables import KIND
    from lumos.hwconfigs.load import ROOT

    text = (ROOT / KIND / "h100_sxm.yaml").read_text()
    bad = tmp_path / "h100_sxm.yaml"
    bad.write_text(text.replace("clock_spread: 0.012", "clock_spread: 8"))
    with pytest.raises(ConfigError, match="clock_spread"):
        load_kernel_physics(bad)
