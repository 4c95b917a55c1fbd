"""The estimator's short paths against the full simulation: a many-micro-batch pipeline
extrapolated from two short ones (`periodic`), and CP ranks folded only with those the
network charges alike (`symmetry`)."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.hwconfigs.load import load_system
from lumos.simulator.network.nccl import make_pricer
from lumos.simulator.run import Mode, SimOptions, simulate
from lumos.simulator.workload import ParallelPlan, Precision, Recompute, estimate, generate
from lumos.simulator.workload.breakdown import Breakdown
from lumos.simulator.workload.periodic import sample_counts
from lumos.simulator.workload.symmetry import price_keys

TOLERANCE = 0.01  # the stated bound per plan; measured differences are below 1e-9

# (model, plan): 1F1B and interleaved, DP overlap on and off, ZeRO 0, 1 and 3, CP, PP 1,
# FP8 with TP-comm overlap
PLANS = [
    ("gpt3-1.3b", ParallelPlan(tp=2, pp=4, dp=2, mbs=1, gbs=32, seq=2048)),
    ("gpt3-1.3b", ParallelPlan(tp=2, pp=4, vp=2, dp=2, mbs=1, gbs=48, seq=2048)),
    (
        "gpt3-1.3b",
        ParallelPlan(
            tp=1, pp=4, vp=3, dp=2, mbs=2, gbs=96, seq=2048, zero=0, overlap_grad_reduce=False
        ),
    ),
    (
        "gpt3-1.3b",
        ParallelPlan(
            tp=2, pp=2, dp=4, mbs=1, gbs=64, seq=2048, overlap_param_gather=False,
            recompute=Recompute.FULL,
        ),
    ),
    ("llama3-8b", ParallelPlan(tp=2, pp=2, cp=2, dp=2, mbs=1, gbs=16, seq=4096)),
    ("gpt3-1.3b", ParallelPlan(tp=4, pp=1, dp=2, mbs=2, gbs=16, seq=2048)),
    ("gpt3-1.3b", ParallelPlan(tp=2, pp=1, dp=4, zero=3, mbs=2, gbs=64, seq=2048)),
    (
        "gpt3-1.3b",
        ParallelPlan(
            tp=2, pp=2, dp=2, mbs=1, gbs=32, seq=2048, tp_comm_overlap=True,
            precision=Precision.FP8,
        ),
    ),
    # FSDP2 in a pipeline (torchtitan): gathered at the first forward, reduced after the last
    # backward, FP32 accumulation every micro-batch
    (
        "llama3-8b",
        ParallelPlan(
            tp=2, pp=4, vp=2, dp=2, mbs=1, gbs=64, seq=4096, zero=3,
            framework="torchtitan-compile",
        ),
    ),
    # the output layer's weight gradients of the first micro-batches deferred to the flush
    # (NeMo's Llama 3.1 405B recipe: 50), 1F1B and interleaved
    ("gpt3-1.3b", ParallelPlan(tp=2, pp=4, dp=2, mbs=1, gbs=64, seq=2048, defer_embedding_wgrad=6)),
    (
        "gpt3-1.3b",
        ParallelPlan(
            tp=2, pp=4, vp=2, dp=2, mbs=1, gbs=96, seq=2048, defer_embedding_wgrad=10
        ),
    ),
]  # fmt: skip


def _ids(case: tuple[str, ParallelPlan]) -> str:
    m, p = case
    return (
        f"{m}-tp{p.tp}-pp{p.pp}-vp{p.vp}-cp{p.cp}-m{p.microbatches}-z{p.zero}"
        f"-d{p.defer_embedding_wgrad}"
    )


@pytest.mark.parametrize("case", PLANS, ids=_ids)
def test_periodic_pipeline_matches_full_simulation(case: tuple[str, ParallelPlan]) -> None:
    model, plan = case
    assert sample_counts(plan) is not None  # each case takes the short path
    fast = estimate(model, plan, "h100")
    full = estimate(model, plan, "h100", exact=True)
    assert fast.stats["microbatches_simulated"] == list(sample_counts(plan) or ())
    assert "microbatches_simulated" not in full.stats
    assert fast.stats["nodes"] < full.stats["nodes"]
    assert fast.iteration_time_s == pytest.approx(full.iteration_time_s, rel=TOLERANCE)
    assert fast.per_rank_s.keys() == full.per_rank_s.keys()
    for rank, t in full.per_rank_s.items():
        assert fast.per_rank_s[rank] == pytest.approx(t, rel=TOLERANCE)
    assert fast.breakdown.rank == full.breakdown.rank
    for f in fields(Breakdown):  # each part within 1 % of the step
        got, want = getattr(fast.breakdown, f.name), getattr(full.breakdown, f.name)
        assert abs(got - want) <= TOLERANCE * full.iteration_time_s, f.name
    assert fast.memory == full.memory


def test_sample_counts_reach_the_steady_state_on_every_stage() -> None:
    # 1F1B: stage 0 warms up with pp - 1 forwards, so from pp on each micro-batch repeats
    assert sample_counts(ParallelPlan(pp=4, dp=1, gbs=64)) == (4, 5)
    # interleaved: stage 0 warms up with 2(pp-1) + (vp-1)pp chunk passes: 2pp needed
    assert sample_counts(ParallelPlan(pp=4, vp=2, dp=1, gbs=64)) == (8, 12)
    assert sample_counts(ParallelPlan(pp=4, vp=2, dp=1, gbs=20)) is None  # no saving
    assert sample_counts(ParallelPlan(pp=1, dp=1, gbs=4)) == (1, 2)
    assert sample_counts(ParallelPlan(pp=4, dp=1, gbs=9)) is None
    # deferred output-layer weight gradients: both samples defer as many as the step
    assert sample_counts(ParallelPlan(pp=4, dp=1, gbs=64, defer_embedding_wgrad=6)) == (6, 7)
    assert sample_counts(ParallelPlan(pp=4, vp=2, dp=1, gbs=64, defer_embedding_wgrad=10)) == (
        12,
        16,
    )
    assert sample_counts(ParallelPlan(pp=4, dp=1, gbs=12, defer_embedding_wgrad=6)) is None


def _simulate(model: str, plan: ParallelPlan, fold: str) -> tuple[dict[int, int], int]:
    """Each rank's step time and how many ranks were simulated: fold "no", "blind" (graphs
    alike) or "priced" (graphs alike and charged alike)."""
    system = load_system("h100", num_nodes=max(plan.world // 8, 1))
    step = generate(model, plan, system)
    pricer = make_pricer(system)
    keys = price_keys(step.graphs, pricer) if fold == "priced" else None
    opts = SimOptions(mode=Mode.MODEL, pricer=pricer, fold=fold != "no", fold_keys=keys)
    result = simulate(step.graphs, opts)
    times = {r.rank: r.iteration_time_ns for r in result.ranks}
    return times, int(result.stats["ranks_simulated"])


def test_cp_ranks_fold_when_every_ring_link_costs_the_same() -> None:
    # TP 8 x CP 2: each CP peer sits on another node, both ring links cross nodes
    plan = ParallelPlan(tp=8, pp=2, cp=2, dp=1, mbs=1, gbs=4, seq=8192)
    full, n_full = _simulate("llama3-8b", plan, "no")
    folded, n_folded = _simulate("llama3-8b", plan, "priced")
    assert folded == full and (n_folded, n_full) == (2, 4)
    est = estimate("llama3-8b", plan, "h100", exact=True)
    assert est.stats["ranks_simulated"] == 2 < est.stats["ranks_generated"] == 4


def test_cp_ranks_fold_in_pairs_when_the_ring_straddles_nodes() -> None:
    # TP 4 x CP 4 on 8-GPU nodes: ring links 0-4 and 8-12 inside a node, 4-8 and 12-0
    # across: CP ranks 0 and 2 pay alike, 1 and 3 pay alike
    plan = ParallelPlan(tp=4, cp=4, dp=1, mbs=1, gbs=2, seq=8192)
    full, n_full = _simulate("llama3-8b", plan, "no")
    folded, n_folded = _simulate("llama3-8b", plan, "priced")
    assert folded == full and (n_folded, n_full) == (2, 4)
    blind, n_blind = _simulate("llama3-8b", plan, "blind")  # graphs alone: one class, wrong
    assert n_blind == 1 and blind != full
    assert estimate("llama3-8b", plan, "h100").stats["ranks_simulated"] == 2


def test_estimate_cli_takes_the_same_path() -> None:
    args = ["estimate", "--model", "gpt3-1.3b", "--tp", "2", "--pp", "4", "--dp", "2"]
    args += ["--gbs", "32", "--seq", "2048", "--json"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)["result"]
    assert result["stats"]["microbatches_simulated"] == [4, 5]
    api = estimate("gpt3-1.3b", PLANS[0][1], "h100")
    assert result["iteration_time_s"] == round(api.iteration_time_s, 6)
    exact = CliRunner().invoke(cli, [*args, "--exact"])
    assert exact.exit_code == 0, exact.output
    assert "microbatches_simulated" not in json.loads(exact.stdout)["result"]["stats"]
