"""ZeRO-2 (`zero=2`, DeepSpeed stage 2): the distributed optimizer's collectives with the
gradients sharded in memory too."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.errors import ConfigError
from lumos.simulator.graph import COLL
from lumos.simulator.workload import ParallelPlan, Precision, estimate, generate
from lumos.simulator.workload.block import DP
from lumos.simulator.workload.spec import load_model

PLAN = ParallelPlan(tp=2, pp=2, dp=4, mbs=1, gbs=16, seq=2048, zero=1)


def _dp_collectives(plan: ParallelPlan) -> list[tuple[int, int]]:
    g = generate("gpt3-1.3b", plan, "h100").graphs[0]
    mask = (g.type == COLL) & (g.group == DP)
    return sorted(zip(g.comm_type[mask].tolist(), g.comm_size[mask].tolist(), strict=True))


def test_zero2_runs_the_distributed_optimizers_collectives() -> None:
    zero2 = dataclasses.replace(PLAN, zero=2)
    assert zero2.step_zero == 1
    assert _dp_collectives(zero2) == _dp_collectives(PLAN)
    one = estimate("gpt3-1.3b", PLAN, "h100")
    two = estimate("gpt3-1.3b", zero2, "h100")
    assert two.iteration_time_s == one.iteration_time_s


def test_zero2_shards_the_gradients_over_the_data_parallel_group() -> None:
    one = estimate("gpt3-1.3b", PLAN, "h100").memory
    two = estimate("gpt3-1.3b", dataclasses.replace(PLAN, zero=2), "h100").memory
    assert one is not None and two is not None
    assert two.gradients_gb == pytest.approx(one.gradients_gb / PLAN.dp)
    assert (two.weights_gb, two.optimizer_gb) == (one.weights_gb, one.optimizer_gb)


def test_zero2_on_the_cli_and_what_it_refuses() -> None:
    args = ["estimate", "--model", "llama3-8b", "--dp", "8", "--gbs", "8", "--seq", "2048"]
    out = CliRunner().invoke(cli, [*args, "--zero", "2", "--json"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)["result"]
    assert result["plan"]["zero"] == 2
    assert any("ZeRO-2 as DeepSpeed stage 2" in a for a in result["assumptions"])
    model = load_model("gpt3-1.3b")
    with pytest.raises(ConfigError, match="fp8_param_gather"):
        fp8 = dataclasses.replace(PLAN, zero=2, precision=Precision.FP8, fp8_param_gather=True)
        fp8.check(model)
    with pytest.raises(ConfigError, match="zero must be 0, 1, 2 or 3"):
        dataclasses.replace(PLAN, zero=4).check(model)
