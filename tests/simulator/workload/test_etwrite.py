"""Generated steps written as Chakra ETs: `lumos et validate` clean, ASTRA-sim pre-flight
passes, and the simulator reads them back to the same step time."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.astra_sim.export import ExportRequest, export_astra_sim
from lumos.simulator.network.nccl import pricer_for_job
from lumos.simulator.run import Mode, SimOptions, simulate
from lumos.simulator.workload import ParallelPlan, generate, load_model
from lumos.simulator.workload.etwrite import write_ets

# GPT-3 175B's shapes and plan (TP8 PP8 DP4), one layer per stage so 256 ETs stay small
PLAN = ParallelPlan(tp=8, pp=8, dp=4, mbs=1, gbs=8, seq=2048, zero=1)


@pytest.fixture(scope="module")
def et_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = dataclasses.replace(load_model("gpt3-175b"), layers=8)
    out = tmp_path_factory.mktemp("ets")
    step = generate(spec, PLAN, "h100")
    write_ets(step, spec, PLAN, out, all_ranks=True)
    return out


def test_all_ranks_written_and_validate_clean(et_dir: Path) -> None:
    assert len(list(et_dir.glob("estimate.*.et"))) == 256
    result = CliRunner().invoke(cli, ["et", "validate", str(et_dir), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)["result"]
    assert (report["files"], report["errors"], report["problems"]) == (256, 0, [])


def test_astra_sim_export_preflight_passes(et_dir: Path, tmp_path: Path) -> None:
    summary = export_astra_sim(ExportRequest(str(et_dir), tmp_path / "bundle", hw="h100"))
    assert summary.ranks == 256
    assert summary.preflight.collectives > 0 and summary.preflight.sends > 0
    assert summary.preflight.sends == summary.preflight.recvs


def test_simulator_reads_the_ets_back(et_dir: Path) -> None:
    spec = dataclasses.replace(load_model("gpt3-175b"), layers=8)
    step = generate(spec, PLAN, "h100")
    pricer = pricer_for_job("h100", 256)
    direct = simulate(step.graphs, SimOptions(mode=Mode.MODEL, pricer=pricer))
    loaded = simulate(et_dir, SimOptions(mode=Mode.MODEL, pricer=pricer, fold=True))
    assert loaded.iteration_time_ns == pytest.approx(direct.iteration_time_ns, rel=1e-3)


def test_one_rank_expert_groups_validate_and_export(tmp_path: Path) -> None:
    """An MoE plan whose expert-data-parallel groups hold one rank (TP2 DP2 EP2 ETP2: 4
    ranks a stage, all of them experts' shards) writes those groups' collectives with
    `pg_ranks` [own rank] and no `pg_name`. Before: `et validate` took them for collectives
    of the all-ranks group (coll-mismatch: the stages hold different expert bytes) and
    ASTRA-sim never finished a rank (the export gave each a one-rank comm group)."""
    from lumos.simulator.workload.spec import model_from_dict

    shape = {"layers": 4, "hidden": 256, "heads": 8, "kv_heads": 4, "ffn": 512}
    shape |= {"vocab": 1024, "mlp": "swiglu", "norm": "rmsnorm", "experts": 8, "top_k": 2}
    shape |= {"moe_ffn": 128, "shared_experts": 1, "first_dense": 1}
    spec = model_from_dict(shape, "one-rank-edp")
    plan = ParallelPlan.build(spec, tp=2, pp=2, dp=2, ep=2, mbs=1, gbs=8, seq=128)
    step = generate(spec, plan, "h100")
    write_ets(step, spec, plan, tmp_path / "ets", all_ranks=True)
    result = CliRunner().invoke(cli, ["et", "validate", str(tmp_path / "ets"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["result"]["errors"] == 0
    summary = export_astra_sim(ExportRequest(str(tmp_path / "ets"), tmp_path / "b", hw="h100"))
    local = [str(f) for f in summary.fixes if "one-rank group" in f.what]
    # expert_param_all_gather + expert_grad_reduce_scatter, per rank and MoE layer's stage
    assert local and all("expert_" in f for f in local)
    groups = json.loads((tmp_path / "b" / "comm_group.json").read_text())
    assert all(len(members) > 1 for members in groups.values())
