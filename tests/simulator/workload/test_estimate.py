"""`estimate()` and `lumos estimate`: the step's figures, their trends, memory flags."""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path

import pytest
from click.testing import CliRunner

import lumos
from lumos.cli.main import cli
from lumos.errors import ConfigError
from lumos.simulator.workload import EstimateResult, ParallelPlan, Precision, Recompute, estimate
from lumos.simulator.workload.spec import load_model
from lumos.simulator.workload.step import generate, model_flops_per_step

BASE = ParallelPlan(tp=4, pp=1, dp=2, mbs=2, gbs=8, seq=4096, zero=1)


@cache
def _run(**changes: object) -> EstimateResult:
    return estimate("llama2-7b", dataclasses.replace(BASE, **changes), "h100")  # type: ignore[arg-type]


def test_figures_are_consistent() -> None:
    r = _run()
    tokens = BASE.gbs * BASE.seq
    assert r.tokens_per_s_per_gpu == pytest.approx(tokens / r.iteration_time_s / BASE.world)
    flops = model_flops_per_step(load_model("llama2-7b"), BASE)
    assert r.mfu == pytest.approx(flops / r.iteration_time_s / BASE.world / 989.4e12)
    b = r.breakdown
    parts = b.compute_s + b.exposed_tp_s + b.exposed_cp_s + b.exposed_dp_s + b.exposed_pp_s
    assert parts + b.bubble_s == pytest.approx(r.iteration_time_s, rel=1e-6)
    assert 0.2 < r.mfu < 0.8


def test_weak_scaling_is_flat() -> None:
    """Once DP crosses nodes, more replicas (same batch per replica) cost little: ring
    reduce-scatter time per byte does not grow with the group."""
    small, big = _run(dp=8, gbs=32), _run(dp=32, gbs=128)
    assert big.iteration_time_s == pytest.approx(small.iteration_time_s, rel=0.05)
    assert big.breakdown.exposed_dp_s >= small.breakdown.exposed_dp_s


def test_fp8_is_faster_but_not_twice() -> None:
    ratio = _run().iteration_time_s / _run(precision=Precision.FP8).iteration_time_s
    assert 1.15 < ratio < 1.9


def test_recompute_costs_a_forward() -> None:
    none, full = _run(), _run(recompute=Recompute.FULL)
    assert 1.2 < full.iteration_time_s / none.iteration_time_s < 1.45
    assert full.memory.activations_gb < none.memory.activations_gb / 4


def test_selective_recompute_with_flash_attention_reruns_its_forward() -> None:
    # Megatron-core checkpoints the core attention: with flash attention that keeps the
    # same tensors (q, k, v) and runs the flash forward again before its backward
    none, selective = _run(), _run(recompute=Recompute.SELECTIVE)
    extra = selective.iteration_time_s - none.iteration_time_s
    assert 0 < extra < 0.05 * none.iteration_time_s
    assert selective.memory.activations_gb == pytest.approx(none.memory.activations_gb)
    g = generate("llama2-7b", dataclasses.replace(BASE, recompute=Recompute.SELECTIVE)).graphs[0]
    names = [g.name(i) for i in range(len(g))]
    layers, micro = load_model("llama2-7b").layers, BASE.gbs // BASE.dp // BASE.mbs
    assert sum(n.endswith("attention_bwd.recompute") for n in names) == layers * micro


def test_pipeline_bubble_shrinks_with_interleaving() -> None:
    plain = _run(tp=1, pp=4, dp=2, gbs=16)
    inter = _run(tp=1, pp=4, vp=2, dp=2, gbs=16)
    assert inter.breakdown.bubble_s < plain.breakdown.bubble_s
    assert plain.breakdown.bubble_s > 0.1 * plain.iteration_time_s


def test_plan_that_does_not_fit_is_flagged() -> None:
    r = estimate("llama2-70b", ParallelPlan(tp=1, dp=1, gbs=1, seq=4096, zero=0), "h100")
    assert not r.fits and r.memory.total_gb > 1000
    assert r.to_json()["fits_in_memory"] is False


def test_bad_plans_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="not a multiple of mbs x dp"):
        estimate("llama2-7b", dataclasses.replace(BASE, gbs=7))
    with pytest.raises(ConfigError, match="no FP8"):
        estimate("llama2-7b", dataclasses.replace(BASE, precision=Precision.FP8), "a100")
    with pytest.raises(ConfigError, match="tp 3 must divide heads"):
        estimate("llama2-7b", dataclasses.replace(BASE, tp=3))


def test_cli_json_has_the_documented_keys() -> None:
    args = ["estimate", "--model", "llama2-7b", "--tp", "4", "--dp", "2", "--mbs", "2"]
    result = CliRunner().invoke(cli, [*args, "--gbs", "8", "--seq", "4096", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["result"]
    for key in ("iteration_time_s", "tokens_per_s_per_gpu", "mfu", "memory_gb_per_gpu"):
        assert data[key] > 0
    assert set(data["breakdown"]) >= {"compute_s", "exposed_tp_s", "exposed_dp_s", "bubble_s"}
    assert data["assumptions"] and data["plan"]["tp"] == 4
    assert data["iteration_time_s"] == pytest.approx(_run().iteration_time_s, rel=1e-6)


def test_cli_bad_model_exit_code() -> None:
    result = CliRunner().invoke(cli, ["estimate", "--model", "nope"])
    assert result.exit_code == 4 and "unknown model 'nope'" in result.output


def test_facade_estimate_is_the_cli_result(tmp_path: Path) -> None:
    """`lumos.estimate(...)` takes the CLI's options as keywords and returns the typed
    result whose JSON is `lumos estimate --json` (timings apart)."""
    r = lumos.estimate(
        "llama2-7b", tp=4, dp=2, mbs=2, gbs=8, seq=4096, hw="h100", output=tmp_path / "ets"
    )
    assert isinstance(r, EstimateResult) and r.plan == BASE
    args = ["estimate", "--model", "llama2-7b", "--tp", "4", "--dp", "2", "--mbs", "2"]
    out = CliRunner().invoke(cli, [*args, "--gbs", "8", "--seq", "4096", "--json"])
    cli_json = json.loads(out.output)["result"]
    mine = json.loads(json.dumps(r.to_json()))
    assert {k: v for k, v in mine.items() if k != "stats"} == {
        k: v for k, v in cli_json.items() if k != "stats"
    }
    assert len(list((tmp_path / "ets").glob("estimate.*.et"))) == r.stats["ranks_generated"]


def test_facade_estimate_defaults_and_errors() -> None:
    r = lumos.estimate("gpt3-1.3b", tp=2, dp=2, precision="fp8", recompute="selective")
    assert r.plan.gbs == 2 and r.plan.seq == load_model("gpt3-1.3b").seq
    assert r.plan.precision is Precision.FP8 and r.plan.recompute is Recompute.SELECTIVE
    with pytest.raises(ConfigError, match="unknown option 'tensor_parallel'"):
        lumos.estimate("gpt3-1.3b", tensor_parallel=2)
    with pytest.raises(ConfigError, match="'fp4' is not a valid Precision"):
        lumos.estimate("gpt3-1.3b", precision="fp4")
    with pytest.raises(ConfigError, match="tp 5 must divide heads"):
        lumos.estimate("gpt3-1.3b", tp=5)
