"""The busiest expert-parallel rank's load (`moe_load`): forced load balancing's factor by
hand and against a Monte Carlo draw of Megatron-Core's random routing, and the busiest
rank's rows in the grouped GEMMs and the all-to-alls of a tiny MoE plan."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload import ParallelPlan
from lumos.simulator.workload.block import EP_STREAM
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.moe_load import expected_max_normal, forced_load_factor
from lumos.simulator.workload.spec import ModelSpec, load_model, model_from_dict
from tests.simulator.workload.tiny_models import SMALL_MOE

SEQ = 16


def _model() -> ModelSpec:
    return model_from_dict(dict(SMALL_MOE), "small", "small-moe")


def _plan(**kw: object) -> ParallelPlan:
    return ParallelPlan.build(_model(), mbs=1, dp=4, gbs=4, seq=SEQ, ep=4, **kw)  # type: ignore[arg-type]


def test_expected_maximum_of_normals() -> None:
    """z(1) = 0, z(2) = 1/sqrt(pi) exactly; z(8) and z(32) as tabulated (1.4236, 2.0697)."""
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), abs=1e-6)
    assert expected_max_normal(8) == pytest.approx(1.4236, abs=1e-4)
    assert expected_max_normal(32) == pytest.approx(2.0697, abs=1e-4)


def test_forced_load_factor_by_hand() -> None:
    """8 experts on 4 ranks (2 each), top 2, 64 tokens routing to a rank (16 a rank x 4):
    a token lands on Hypergeometric(8, 2, 2) of the rank's experts, mean 1/2, variance
    2 x 1/4 x 3/4 x 6/7 = 9/28; the rank's load has CV sqrt(9/28 / 64) / (1/2); the loads
    of the 4 ranks sum to the fixed 128 picks (correlation -1/3), so the busiest is the
    mean plus z(4) x sqrt(4/3) standard deviations: 1.168."""
    cv = math.sqrt(9 / 28 / 64) / 0.5
    expect = 1 + expected_max_normal(4) * math.sqrt(4 / 3) * cv
    assert forced_load_factor(8, 4, 2, 64) == pytest.approx(expect)
    assert expect == pytest.approx(1.168, abs=1e-3)
    assert forced_load_factor(8, 1, 2, 64) == 1.0  # one rank holds every expert


def test_forced_load_factor_matches_random_routing() -> None:
    """Megatron-Core's forced balancing (`RandomSTE`: standard normal logits, top-k): the
    busiest of the ranks' loads over the mean, drawn 1,500 times, within 1 % of the
    closed form for 128 experts, top 8, EP 8 and 64 tokens (a small batch, where it is
    large) and for the tiny plan."""
    rng = np.random.default_rng(0)
    for experts, ep, k, tokens in ((128, 8, 8, 64), (8, 4, 2, 64)):
        logits = rng.standard_normal((1500, tokens, experts), dtype=np.float32)
        top = np.argpartition(-logits, k - 1, axis=2)[:, :, :k] // (experts // ep)
        loads = np.stack([(top == r).sum(axis=(1, 2)) for r in range(ep)], axis=1)
        measured = float((loads.max(axis=1) / (tokens * k / ep)).mean())
        assert forced_load_factor(experts, ep, k, tokens) == pytest.approx(measured, rel=0.01)


def _nodes(plan: ParallelPlan, forward: bool = True) -> dict[str, tuple[int, int, int]]:
    gen = Generator(_model(), plan, KernelModel.for_gpu(load_system("h100").gpu))
    blk = gen.block(0, 0, forward)
    names = gen.names.as_list()
    c = blk.cols
    return {
        names[n]: (int(c["nbytes"][i]), int(c["csize"][i]), int(c["stream"][i]))
        for i, n in enumerate(blk.name)
    }


def test_busiest_rank_carries_its_load_in_the_expert_work_and_all_to_alls() -> None:
    """A stated load of 1.5 (a trained router's profile): the busiest rank's local experts
    get 48 of the mean 32 rows (sort: 2 x 48 x 64 x 2 bytes; FC1's M = 24 rows an expert),
    its dispatch and combine all-to-alls carry 48 rows; its own permute stays 16 + 32 rows.
    By default (forced balancing) the factor is the closed form's."""
    stated = _nodes(_plan(moe_load_factor=1.5))
    assert stated["layer0.moe.sort"][0] == 2 * 48 * 64 * 2
    assert stated["layer0.moe.permute"][0] == (SEQ + 32) * 64 * 2
    assert stated["layer0.moe.dispatch"][1:] == (48 * 64 * 2, EP_STREAM)
    assert stated["layer0.moe.combine"][1] == 48 * 64 * 2
    fc1_bytes = 2 * ((24 * 64 + 64 * 64) * 2 + 24 * 64 * 2)  # 2 experts: A, B in, C out
    assert stated["layer0.moe.fc1"][0] == fc1_bytes
    rows = round(32 * forced_load_factor(8, 4, 2, SEQ * 4))
    assert rows == 37
    assert _nodes(_plan())["layer0.moe.sort"][0] == 2 * rows * 64 * 2
    with pytest.raises(ConfigError, match="moe_load_factor"):
        _plan(moe_load_factor=0.8)
    with pytest.raises(ConfigError, match="mixture-of-experts"):
        ParallelPlan.build(load_model("llama3-8b"), dp=2, moe_load_factor=1.2)


def test_cli_states_the_load_and_token_drop() -> None:
    """`lumos estimate --moe-load-factor 1.5` / `--moe-token-drop`: the plan's header names
    them and the stated load makes the step slower than forced balancing's."""
    from click.testing import CliRunner

    from lumos.cli.main import cli

    base = ["estimate", "--model", "qwen3-30b-a3b", "--dp", "8", "--ep", "8", "--gbs", "8"]
    base += ["--seq", "4096", "--json"]  # at 1,024 tokens a GPU the host sets it (moe_host)
    runs = {}
    for extra in ((), ("--moe-load-factor", "1.5"), ("--moe-token-drop",)):
        out = CliRunner().invoke(cli, [*base, *extra])
        assert out.exit_code == 0, out.output
        runs[extra[:1]] = json.loads(out.output)["result"]
    assert runs[("--moe-load-factor",)]["plan"]["moe_load_factor"] == 1.5
    assert runs[("--moe-token-drop",)]["plan"]["moe_token_drop"] is True
    slow, forced = runs[("--moe-load-factor",)], runs[()]
    assert slow["iteration_time_s"] > forced["iteration_time_s"]
    text = CliRunner().invoke(cli, [*base[:-1], "--moe-load-factor", "1.5"]).output
    assert "busiest EP rank's load x1.5" in text
