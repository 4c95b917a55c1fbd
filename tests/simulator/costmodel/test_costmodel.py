"""Compute cost model: calibration files, roofline times, and pricing host-ET-only graphs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lumos.converters.ops.args import DType
from lumos.converters.ops.flops import CostKind, OpCost
from lumos.converters.pytorch.convert import convert
from lumos.errors import ConfigError, SimulationError
from lumos.hwconfigs.calibration_tables import load_calibration, shipped_calibrations
from lumos.hwconfigs.load import load_gpu, shipped_names
from lumos.simulator.costmodel.estimate import ESTIMATED_STREAM, estimate_graph
from lumos.simulator.costmodel.roofline import CostModel
from lumos.simulator.graph import RankGraph
from lumos.simulator.load import load_graphs
from lumos.simulator.network.nccl import pricer_for_job
from lumos.simulator.run import Mode, SimOptions, simulate
from tests.conftest import fixture_path


def test_every_shipped_gpu_has_a_calibration_that_loads() -> None:
    assert set(shipped_calibrations()) == set(shipped_names("gpus"))
    for gpu in shipped_calibrations():
        cal = load_calibration(gpu)
        assert cal.gpu == gpu and cal.sources
        assert CostModel.for_gpu(load_gpu(gpu)).calibration == cal


def test_calibration_unknown_key_is_refused(tmp_path: Path) -> None:
    text = (
        Path(load_calibration.__code__.co_filename).parent / "calibration" / "h100_sxm.yaml"
    ).read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("kernel_overhead_ns:", "kernel_overhed_ns:"))
    with pytest.raises(ConfigError, match="did you mean 'kernel_overhead_ns'"):
        load_calibration(bad)


def test_roofline_times_on_h100() -> None:
    model = CostModel.for_gpu(load_gpu("h100_sxm"))
    n = 8192
    big = OpCost(CostKind.MATMUL, 2.0 * n**3, 3.0 * n * n * 2, DType.BF16)
    t = model.time_ns(big)
    achieved = big.flops / t / 1e3  # TFLOP/s
    assert 600 < achieved < 989.4  # large GEMM near the calibrated plateau (~0.78 of peak)
    fp32 = OpCost(CostKind.MATMUL, big.flops, big.bytes, DType.FP32)
    assert model.time_ns(fp32) > 10 * t  # no TF32 for fp32 matmul by default
    copy = OpCost(CostKind.MEMORY, 0.0, 2.0 * 2**30, DType.FP32)
    assert 2 * 2**30 / model.time_ns(copy) == pytest.approx(3350 * 0.9, rel=0.02)
    tiny = OpCost(CostKind.MEMORY, 10.0, 64.0, DType.FP32)
    assert model.time_ns(tiny) == pytest.approx(model.calibration.kernel_overhead_ns, abs=5)
    assert model.time_ns(OpCost(CostKind.NO_KERNEL, 0, 0, DType.UNKNOWN)) == 0
    assert model.host_ns(None) < model.host_ns(big)


def _host_only(tmp_path: Path) -> Path:
    convert([fixture_path("param/et_replay/tests/inputs/resnet_et.json.gz")], tmp_path)
    return tmp_path


def test_host_only_resnet_gets_gpu_kernels_and_a_plausible_step(tmp_path: Path) -> None:
    et = _host_only(tmp_path)
    (g,) = load_graphs(et)
    model = CostModel.for_gpu(load_gpu("a100_sxm_80gb"))
    priced = estimate_graph(g, model)
    kernels = np.flatnonzero(priced.stream == ESTIMATED_STREAM)
    assert len(kernels) > 400 and len(priced) == len(g) + len(kernels)
    convs = [int(k) for k in kernels if priced.name(int(k)) == "aten::cudnn_convolution"]
    assert len(convs) == 53 and all(priced.dur_ns[k] > 5_000 for k in convs)
    assert (priced.dur_ns[: len(g)][priced.is_cpu_op[: len(g)]] > 0).all()
    opts = SimOptions(Mode.MODEL, pricer=pricer_for_job("a100", 1), cost_model=model)
    result = simulate(et, opts)
    assert 10e6 < result.iteration_time_ns < 100e6  # ResNet-50 fwd+bwd, batch 32 (leaf ops only)


def test_model_mode_without_cost_model_is_a_config_error(tmp_path: Path) -> None:
    et = _host_only(tmp_path)
    with pytest.raises(ConfigError, match="--hw"):
        simulate(et, SimOptions(Mode.MODEL, pricer=pricer_for_job("a100", 1)))
    # a replay of nothing but missing durations would be 0 ns: refused, saying why
    with pytest.raises(SimulationError, match=r"no measured duration.*--hw"):
        simulate(et, SimOptions(Mode.REPLAY))


def test_num_ops_nodes_without_duration_are_priced() -> None:
    g = RankGraph.from_arrays(
        0,
        2,
        dur_ns=np.array([-1, 500], np.int64),
        dep_ptr=np.array([0, 0, 1]),
        dep_idx=np.array([0], np.int32),
    )
    g.op_work[0] = (2.0 * 4096**3, 3 * 4096 * 4096 * 2.0)
    model = CostModel.for_gpu(load_gpu("h100_sxm"))
    priced = estimate_graph(g, model)
    assert priced.dur_ns[1] == 500
    assert priced.dur_ns[0] == model.time_ns(
        OpCost(CostKind.MATMUL, 2.0 * 4096**3, 3 * 4096 * 4096 * 2.0, DType.BF16)
    )
    result = simulate([g], SimOptions(Mode.REPLAY, estimate_missing=True, cost_model=model))
    assert result.iteration_time_ns == priced.dur_ns[0] + 500


def test_host_time_is_charged_per_leaf_op_folded_into_a_node(tmp_path: Path) -> None:
    """A host-only node standing for k leaf ops (`host_ops`) costs k leaf ops of host time."""
    model = CostModel.for_gpu(load_gpu("h100_sxm"))
    cal = model.calibration
    per_leaf = cal.host_op_ns + cal.host_gap_ns
    assert model.host_ns(None, 3) - model.host_ns(None, 1) == round(2 * per_leaf)
    # On a real host-only conversion, folded nodes carry host_ops and the graph sees it.
    convert(
        [str(fixture_path("param/et_replay/tests/inputs/resnet_et.json.gz"))], tmp_path, prefix="r"
    )
    (graph,) = load_graphs(tmp_path / "r")
    assert graph.op_host_ops and max(graph.op_host_ops.values()) > 1
