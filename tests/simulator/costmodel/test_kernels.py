"""Shape-level kernel model: wave quantisation, K efficiency, FP8, attention, memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumos.errors import ConfigError
from lumos.hwconfigs.kernel_tables import load_kernel_physics, shipped_kernel_tables
from lumos.hwconfigs.load import load_gpu
from lumos.simulator.costmodel.kernels import KernelModel


@pytest.fixture(scope="module")
def h100() -> KernelModel:
    return KernelModel.for_gpu(load_gpu("h100_sxm"))


@pytest.mark.parametrize("gpu", shipped_kernel_tables())
def test_every_shipped_table_loads_with_sources(gpu: str) -> None:
    physics = load_kernel_physics(gpu)
    assert physics.gpu == gpu and physics.sources and physics.sm_count > 0


def test_wave_quantisation_one_tile_more_costs_a_wave(h100: KernelModel) -> None:
    tm, tn = h100.physics.gemm_tile
    rows, cols = 12, h100.physics.sm_count // 12  # exactly one wave of tiles (132 = 12 x 11)
    m, n, k = tm * rows, tn * cols, 8192
    overhead = h100.physics.kernel_overhead_ns

    def main_loop(mm: int) -> float:  # without the fixed overhead and the HBM epilogue
        return h100.gemm_ns(mm, n, k) - overhead - h100.memory_ns(mm * n * 2, overhead=False)

    assert main_loop(m + 1) == pytest.approx(2 * main_loop(m), rel=1e-9)  # one more row: 2 waves


def test_big_gemm_efficiency_approaches_the_plateau(h100: KernelModel) -> None:
    m = n = k = 16384
    plateau = h100.physics.gemm_efficiency_bf16 * h100.physics.sustained_clock_fraction
    achieved = 2 * m * n * k / h100.gemm_ns(m, n, k) / 989.4e3
    assert 0.9 * plateau < achieved <= plateau
    small_k = 2 * m * n * 256 / h100.gemm_ns(m, n, 256) / 989.4e3
    assert small_k < 0.8 * achieved  # the epilogue weighs on short K loops


def test_fp8_gemm_faster_than_bf16_but_not_2x(h100: KernelModel) -> None:
    ratio = h100.gemm_ns(8192, 8192, 8192) / h100.gemm_ns(8192, 8192, 8192, "fp8")
    assert 1.3 < ratio < 2.0


def test_fp8_refused_without_fp8_tensor_cores() -> None:
    a100 = KernelModel.for_gpu(load_gpu("a100_sxm_80gb"))
    with pytest.raises(ConfigError, match="no FP8"):
        a100.gemm_ns(1024, 1024, 1024, "fp8")


def test_flash_attention_causal_halves_and_backward_costs_more(h100: KernelModel) -> None:
    full = h100.attention_ns(32, 4096, 4096, 128, causal=False)
    causal = h100.attention_ns(32, 4096, 4096, 128, causal=True)
    assert causal == pytest.approx((full - 1600) / 2 + 1600, rel=1e-6)
    assert h100.attention_ns(32, 4096, 4096, 128, backward=True) > 2.5 * causal


def test_memory_bound_at_achieved_bandwidth(h100: KernelModel) -> None:
    ns = h100.memory_ns(1e9, overhead=False)
    assert ns == pytest.approx(1e9 / (3350 * h100.physics.memory_efficiency))


def test_bad_physics_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "k.yaml"
    path.write_text("gpu: x\nsources: [a]\nsm_count: 10\ngemm_tile: [128]\n")
    with pytest.raises(ConfigError, match=r"k.yaml: gemm_tile must be \[rows, cols\]"):
        load_kernel_physics(path)


def test_fp32_accumulating_epilogue_costs_hbm_time(h100: KernelModel) -> None:
    """A weight gradient accumulating into FP32 main grads reads and writes 8 B per
    element after its main loop: with K = 2048 tokens that is a visible share."""
    m, n, k = 12288, 12288, 2048
    plain, acc = h100.gemm_ns(m, n, k), h100.gemm_ns(m, n, k, out_bytes=8)
    assert acc - plain == pytest.approx(h100.memory_ns(m * n * 6, overhead=False), rel=1e-9)
    assert 1.1 < acc / plain < 1.6
