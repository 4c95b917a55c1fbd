"""GPU swap per kernel class (small GPU step and the TraceLens H100 trace) and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.ops.args import DType
from lumos.converters.ops.cost import CostKind, OpCost
from lumos.converters.pytorch.convert import convert
from lumos.hwconfigs.load import load_gpu
from lumos.simulator.costmodel.roofline import CostModel
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.api import recover
from lumos.simulator.whatif.etset import load_etset, simulate_etset, write_etset
from lumos.simulator.whatif.hardware import ClassRatios, kernel_class, kernel_ratio, swap_gpu
from tests.conftest import fixture_path
from tests.simulator.whatif.builders import training_step


def _model(name: str) -> CostModel:
    return CostModel.for_gpu(load_gpu(name))


def test_kernel_classes_from_names() -> None:
    assert kernel_class("sm80_xmma_gemm_f16f16_f32") is CostKind.MATMUL
    assert kernel_class("vectorized_elementwise_kernel<aten::gelu>") is CostKind.MEMORY
    assert kernel_class("cudnn::detail::implicit_convolve_sgemm") is CostKind.CONV
    assert kernel_class("flash_fwd_kernel") is CostKind.ATTENTION
    assert kernel_class("Memcpy HtoD (Pinned -> Device)") is CostKind.TRANSFER


def test_swap_retimes_each_kernel_by_the_cost_model_ratio_of_its_work() -> None:
    v100, h100 = _model("v100_sxm2"), _model("h100_sxm")
    base = recover(training_step(layers=2, gpu=True)).ets
    summary = ClassRatios()
    fast = swap_gpu(base, v100, h100, summary=summary)
    for old, new in zip(base.rank(0).nodes, fast.rank(0).nodes, strict=True):
        if nd.on_gpu(old) and not nd.is_comm(old):
            # invert the V100 roofline at the measured time, price that work on the H100
            want = nd.duration(old) * kernel_ratio(v100, h100, old.name, nd.duration(old))
            assert nd.duration(new) == round(want)
        else:
            assert nd.duration(new) == nd.duration(old)
    gemm = OpCost(CostKind.MATMUL, 1e12, 0.0, DType.FP16, True)
    assert summary.new_ns["matmul"] / summary.old_ns["matmul"] < 1.0
    assert h100.time_ns(gemm) < v100.time_ns(gemm)
    assert simulate_etset(fast).iteration_time_ns < simulate_etset(base).iteration_time_ns


@pytest.mark.parametrize(
    "model", ["gaunernst_bert-small-uncased__1016001", "Falconsai_nsfw_image_detection__1016002"]
)
def test_tracelens_h100_to_a100_and_v100_slows_compute(tmp_path: Path, model: str) -> None:
    # the folder holds two unrelated single-GPU runs (the numbers are pids): one at a time
    convert([fixture_path(f"TraceLens/tests/traces/h100/{model}.json.gz")], tmp_path)
    ets = load_etset(tmp_path)
    h100 = _model("h100_sxm")
    totals = {}
    for gpu in ("a100_sxm_80gb", "v100_sxm2"):
        summary = ClassRatios()
        swap_gpu(ets, h100, _model(gpu), summary=summary)
        totals[gpu] = sum(summary.new_ns.values()) / sum(summary.old_ns.values())
        assert all(summary.new_ns[k] > summary.old_ns[k] for k in summary.kernels)
    assert 1.0 < totals["a100_sxm_80gb"] < totals["v100_sxm2"]


def test_cli_whatif_json_and_written_ets(tmp_path: Path) -> None:
    write_etset(training_step(layers=3), tmp_path / "base")
    out = tmp_path / "edited"
    result = CliRunner().invoke(
        cli,
        [
            "whatif",
            str(tmp_path / "base"),
            "--layers",
            "5",
            "--dp",
            "4",
            "-o",
            str(out),
            "--json",
            "--explain",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)["result"]
    assert payload["predicted"]["iteration_time_ns"] > payload["base"]["iteration_time_ns"]
    assert len(payload["predicted"]["ranks"]) == 4 and len(payload["base"]["ranks"]) == 2
    assert payload["structure"]["ranks"][0]["layers"] == 3
    assert len(list(out.glob("whatif.*.et"))) == 4
    validate = CliRunner().invoke(cli, ["et", "validate", str(out)])
    assert validate.exit_code == 0, validate.output


def test_cli_whatif_bad_slow_rank_is_a_clear_error(tmp_path: Path) -> None:
    write_etset(training_step(layers=2), tmp_path)
    result = CliRunner().invoke(cli, ["whatif", str(tmp_path), "--slow-rank", "1:2"])
    assert result.exit_code != 0
    assert "RANK=FACTOR" in result.output


@pytest.mark.parametrize("hw", ["h100"])
def test_cli_hw_needs_base_hw(tmp_path: Path, hw: str) -> None:
    write_etset(training_step(layers=2, gpu=True), tmp_path)
    result = CliRunner().invoke(cli, ["whatif", str(tmp_path), "--hw", hw])
    assert result.exit_code != 0 and "--base-hw" in result.output
    ok = CliRunner().invoke(
        cli, ["whatif", str(tmp_path), "--hw", hw, "--base-hw", "v100", "--json"]
    )
    assert ok.exit_code == 0, ok.output
    assert "matmul" in json.loads(ok.output)["result"]["edits"][0]
