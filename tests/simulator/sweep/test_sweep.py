"""Sweep: plan enumeration rules (exact counts), journal resume, failures, engines agree."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from lumos.errors import ConfigError
from lumos.simulator.sweep.journal import Journal
from lumos.simulator.sweep.pareto import pareto_front, pareto_html
from lumos.simulator.sweep.runner import journal_path, sweep
from lumos.simulator.sweep.space import SweepSpace, enumerate_plans, plan_key
from lumos.simulator.sweep.table import ranked
from lumos.simulator.workload.spec import ModelSpec

TOY = ModelSpec(name="toy", layers=8, hidden=1024, heads=16, kv_heads=16, ffn=4096, vocab=32000)


def test_enumeration_counts_every_rule_exactly() -> None:
    space = SweepSpace(
        model="toy",
        gpus=16,
        gbs=32,
        seq=2048,
        tp=(1, 2, 4, 8, 16),
        pp=(1, 2, 4),
        mbs=(1, 2),
        recompute=("none",),
    )
    found = enumerate_plans(space, TOY, gpus_per_node=8)
    # 5 tp x 3 pp x 2 mbs = 30 points. tp x pp must divide 16 GPUs: tp 16 with pp 2 or 4
    # and tp 8 with pp 4 do not (3 x 2 mbs = 6); tp 16 x pp 1 divides but exceeds a node
    # of 8 (2); the other 22 are valid
    assert found.grid_points == 30
    assert len(found.plans) == 22
    assert found.rejected == {
        "tp larger than a node": 2,
        "tp x pp x cp does not divide the GPU count": 6,
    }
    assert all(p.tp * p.pp * p.cp * p.dp == 16 for p in found.plans)
    assert len({plan_key(p) for p in found.plans}) == 22


def test_enumeration_applies_the_model_and_batch_rules() -> None:
    # 12 heads: tp 8 cannot split them; gbs 8 with dp 16 cannot hold one micro-batch each;
    # 8 layers cannot fill pp 4 x vp 4 chunks; vp > 1 needs pp > 1
    model = ModelSpec(name="odd", layers=8, hidden=768, heads=12, kv_heads=12, ffn=3072, vocab=1000)
    space = SweepSpace(
        model="odd",
        gpus=16,
        gbs=8,
        seq=1024,
        tp=(1, 4, 8),
        pp=(1, 4),
        vp=(1, 4),
        mbs=(1,),
        recompute=("none",),
    )
    found = enumerate_plans(space, model, gpus_per_node=8)
    valid = {(p.tp, p.pp, p.vp) for p in found.plans}
    # tp1pp1: dp 16 > gbs 8 -> out; tp1pp4: dp 4 ok, vp4 -> 16 chunks > 8 layers -> out
    # tp4pp1: dp 4 ok (vp 4 without pp -> out); tp4pp4: dp 1 ok, vp 4 -> out; tp 8: heads -> out
    assert valid == {(1, 4, 1), (4, 1, 1), (4, 4, 1)}
    assert sum(found.rejected.values()) == found.grid_points - 3
    assert found.rejected["virtual stages without pipeline parallelism"] == 3
    assert not any(ch.isdigit() for rule in found.rejected for ch in rule)


def test_the_jobs_framework_decides_which_plans_are_valid() -> None:
    """ZeRO-3 with pipeline parallelism is FSDP2's (torchtitan keeps a pipelined stage's
    parameters gathered): a torchtitan sweep runs those plans, a Megatron one turns them
    away under their rule; every plan carries the framework and TP overlap (TP > 1 only)."""
    grid = dict(model="toy", gpus=16, gbs=32, seq=2048, tp=(1, 2), pp=(1, 2), mbs=(1,))
    grid |= dict(zero=(1, 3), recompute=("none",))
    titan = enumerate_plans(
        SweepSpace(**grid, framework="torchtitan", tp_comm_overlap=True), TOY, 8
    )
    mega = enumerate_plans(SweepSpace(**grid), TOY, gpus_per_node=8)
    assert len(titan.plans) == 8 and not titan.rejected
    assert {p.framework for p in titan.plans} == {"torchtitan"}
    assert sum(p.fsdp_under_pp for p in titan.plans) == 2  # zero 3 x pp 2 x tp 1, 2
    assert all(p.tp_comm_overlap == (p.tp > 1) for p in titan.plans)
    assert len(mega.plans) == 6
    (rule,) = mega.rejected
    assert "with pipeline parallelism is modelled as FSDPN runs it" in rule  # digits: N
    assert mega.rejected[rule] == 2
    with pytest.raises(ConfigError, match="sweep: framework must be one of megatron"):
        enumerate_plans(SweepSpace(**grid, framework="deepspeed"), TOY, gpus_per_node=8)


def test_unknown_option_is_a_clear_error() -> None:
    space = SweepSpace(model="toy", gpus=8, gbs=8, seq=512, recompute=("sometimes",))
    with pytest.raises(ConfigError, match="unknown recompute 'sometimes'"):
        enumerate_plans(space, TOY, gpus_per_node=8)


def fake_work(point: dict[str, Any]) -> dict[str, Any]:
    """A deterministic stand-in for `evaluate` (fast, picklable); plan tp4-pp2 fails."""
    plan = point["plan"]
    if plan["tp"] == 4 and plan["pp"] == 2:
        return {"key": point["key"], **plan, "error": "injected failure"}
    if os.environ.get("LUMOS_TEST_SLOW_WORK"):
        time.sleep(0.2)
    step = 1.0 + 0.1 * plan["pp"] + 0.05 / plan["tp"] + 0.01 * plan["mbs"]
    memory = 80.0 / plan["tp"] / plan["pp"] + 4 * plan["mbs"]
    return {
        "key": point["key"],
        **plan,
        "tokens_per_s_per_gpu": 1e4 / step,
        "iteration_time_s": step,
        "mfu": 0.4 / step,
        "memory_gb_per_gpu": memory,
        "fits": memory <= 60,
        "compute_s": step,
        "exposed_tp_s": 0.0,
        "exposed_cp_s": 0.0,
        "exposed_dp_s": 0.0,
        "exposed_pp_s": 0.0,
        "bubble_s": 0.0,
    }


SMALL = SweepSpace(
    model="llama3-8b",
    gpus=16,
    gbs=64,
    seq=2048,
    tp=(1, 2, 4, 8),
    pp=(1, 2, 4),
    mbs=(1, 2),
    recompute=("none",),
)


def test_one_failing_plan_is_reported_not_fatal(tmp_path: Path) -> None:
    result = sweep(SMALL, tmp_path / "r.csv", work=fake_work)
    failed = [r for r in result.rows if r.get("error")]
    assert result.failed == len(failed) == 2  # tp4-pp2, mbs 1 and 2
    assert all(r["error"] == "injected failure" for r in failed)
    assert result.rows[-1].get("error") and not result.rows[0].get("error")
    best = result.best
    assert best is not None and best["fits"]
    text = (tmp_path / "r.csv").read_text().splitlines()
    assert text[0].startswith("rank,key,tp,pp") and len(text) == len(result.rows) + 1


def test_torn_journal_line_is_redone(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    full = sweep(SMALL, out, work=fake_work)
    path = journal_path(out)
    lines = path.read_bytes().split(b"\n")
    # keep the header and 5 rows, then half a row as a kill mid-write would leave
    path.write_bytes(b"\n".join(lines[:6]) + b"\n" + lines[6][:20])
    again = sweep(SMALL, out, work=fake_work)
    assert again.resumed == 5 and again.ran == len(full.rows) - 5
    assert [r["key"] for r in again.rows] == [r["key"] for r in full.rows]


def test_journal_of_another_sweep_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    sweep(SMALL, out, work=fake_work)
    other = SweepSpace(model="llama3-8b", gpus=32, gbs=64, seq=2048, recompute=("none",))
    with pytest.raises(ConfigError, match="another sweep"):
        Journal(journal_path(out), {"space": other.to_json()})


def test_local_pool_gives_the_same_table_as_one_process(tmp_path: Path) -> None:
    one = sweep(SMALL, tmp_path / "a.csv", work=fake_work, workers=1)
    two = sweep(SMALL, tmp_path / "b.csv", work=fake_work, workers=2)
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert one.ran == two.ran == len(one.rows)


def test_pareto_front_and_page(tmp_path: Path) -> None:
    rows = ranked(
        fake_work({"key": f"k{i}", "plan": {"tp": tp, "pp": pp, "mbs": 1}})
        for i, (tp, pp) in enumerate([(1, 1), (2, 1), (8, 1), (8, 2), (4, 4)])
    )
    front = pareto_front(rows)
    mems = [r["memory_gb_per_gpu"] for r in front]
    tps = [r["tokens_per_s_per_gpu"] for r in front]
    assert mems == sorted(mems) and tps == sorted(tps)  # more memory only for more speed
    for r in rows:  # nothing that fits beats a front point on both axes
        if r.get("fits") and not r.get("error"):
            assert not any(
                r["memory_gb_per_gpu"] <= f["memory_gb_per_gpu"]
                and r["tokens_per_s_per_gpu"] > f["tokens_per_s_per_gpu"]
                for f in front
            )
    page = pareto_html(rows, tmp_path / "p.html", "toy", 80.0).read_text()
    assert page.count("<circle") == sum(1 for r in rows if not r.get("error"))
    assert "<script" not in page and "Pareto front" in page


def test_killed_sweep_resumes_without_redoing_plans(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    code = (
        "import sys; from lumos.simulator.sweep.runner import sweep\n"
        "from tests.simulator.sweep.test_sweep import SMALL, fake_work\n"
        f"sweep(SMALL, {str(out)!r}, work=fake_work)\n"
    )
    env = {**os.environ, "LUMOS_TEST_SLOW_WORK": "1"}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=Path(__file__).parents[3])
    path = journal_path(out)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= 4:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = [orjson.loads(x) for x in path.read_bytes().split(b"\n")[1:] if x.strip()]
    assert 3 <= len(kept) < 22
    resumed = sweep(SMALL, out, work=fake_work)
    assert resumed.resumed == len(kept) and resumed.ran == len(resumed.rows) - len(kept)
    fresh = sweep(SMALL, tmp_path / "fresh.csv", work=fake_work)
    assert out.read_bytes() == (tmp_path / "fresh.csv").read_bytes()
    assert fresh.ran == len(fresh.rows)


def test_ray_local_cluster_gives_the_same_table_as_the_local_pool(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="Ray is the optional lumos[ray] extra")
    local = sweep(SMALL, tmp_path / "local.csv", work=fake_work, workers=2)
    ray_run = sweep(SMALL, tmp_path / "ray.csv", work=fake_work, workers=2, executor="ray")
    assert ray_run.ran == local.ran == len(local.rows)
    assert (tmp_path / "ray.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()


def test_sizing_without_simulating_matches_the_full_estimate() -> None:
    from lumos.simulator.sweep.evaluate import plan_memory_gb
    from lumos.simulator.workload.plan import ParallelPlan, Recompute
    from lumos.simulator.workload.step import estimate

    for plan in (
        ParallelPlan(tp=2, pp=2, dp=2, mbs=1, gbs=16, seq=1024),
        ParallelPlan(tp=1, pp=4, dp=2, vp=2, mbs=2, gbs=32, seq=1024, recompute=Recompute.FULL),
    ):
        gb, fits = plan_memory_gb("gpt3-350m", plan, "h100")
        full = estimate("gpt3-350m", plan, "h100")
        assert gb == pytest.approx(full.memory.total_gb, rel=1e-12) and fits == full.fits


def test_parquet_table_has_every_column(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet", reason="Parquet is the lumos[parquet] extra")
    result = sweep(SMALL, tmp_path / "r.parquet", work=fake_work)
    table = pq.read_table(tmp_path / "r.parquet")
    assert table.num_rows == len(result.rows)
    assert {"tp", "pp", "dp", "mbs", "tokens_per_s_per_gpu", "fits", "error"} <= set(
        table.column_names
    )
    assert table.column("key").to_pylist() == [r["key"] for r in result.rows]


def test_cli_sweep_estimates_real_plans_and_sizes_the_rest(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from lumos.cli.main import cli

    args = [
        "sweep",
        "--model",
        "gpt3-1.3b",
        "--gpus",
        "16",
        "--gbs",
        "64",
        "--seq",
        "2048",
        "--tp",
        "1,2,4",
        "--pp",
        "1,2",
        "--mbs",
        "1,4",
        "--recompute",
        "none",
        "--workers",
        "1",
        "-o",
        str(tmp_path / "r.csv"),
        "--plot",
        str(tmp_path / "p"),
        "--json",
        "--top",
        "0",
    ]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    data = orjson.loads(out.stdout)["result"]
    plans = data["plans"]
    assert data["valid_plans"] == len(plans) == 12 and data["failed"] == 0
    simulated = [p for p in plans if p.get("tokens_per_s_per_gpu") is not None]
    assert simulated and all(p["fits"] for p in simulated)
    speeds = [p["tokens_per_s_per_gpu"] for p in simulated]
    assert speeds == sorted(speeds, reverse=True)
    for p in simulated:  # the table's figures are the estimate's own
        assert p["iteration_time_s"] * p["tokens_per_s_per_gpu"] * 16 == pytest.approx(64 * 2048)
    assert (tmp_path / "p.html").read_text().count("<circle") == len(simulated)


def test_trace_grid_sweeps_whatif_edits_of_a_real_capture(tmp_path: Path) -> None:
    from lumos.converters.pytorch.convert import convert
    from lumos.simulator.sweep.runner import sweep_trace
    from lumos.simulator.sweep.trace_grid import TraceSpace
    from lumos.simulator.whatif.api import WhatIf, run_whatif
    from tests.conftest import DATA

    convert([DATA / "captures" / "ddp"], tmp_path / "et", prefix="ddp")
    space = TraceSpace(target=str(tmp_path / "et"), layers=(2, 4), dp=(2, 4))
    result = sweep_trace(space, tmp_path / "t.csv", workers=1)
    rows = {r["key"]: r for r in result.rows}
    assert len(rows) == 5 and result.failed == 0  # the trace itself + 2 x 2 edits
    traced = rows["traced"]["iteration_time_s"]
    # the capture has 2 layers on 2 ranks: that edit is the trace itself
    assert rows["layers2-dp2"]["iteration_time_s"] == pytest.approx(traced, rel=5e-3)
    assert traced < rows["layers4-dp2"]["iteration_time_s"]
    assert rows["layers2-dp4"]["ranks"] == 4
    times = [r["iteration_time_s"] for r in result.rows]
    assert times == sorted(times)
    direct = run_whatif(tmp_path / "et", WhatIf(layers=4, dp=4))
    assert rows["layers4-dp4"]["iteration_time_s"] == direct.predicted.iteration_time_ns / 1e9
    again = sweep_trace(space, tmp_path / "t.csv", workers=1)
    assert again.resumed == 5 and again.ran == 0


def test_cli_trace_sweep_json_follows_the_schema(tmp_path: Path) -> None:
    import jsonschema
    from click.testing import CliRunner

    from lumos import schemas
    from lumos.cli.main import cli
    from lumos.converters.pytorch.convert import convert
    from tests.conftest import DATA

    convert([DATA / "captures" / "ddp"], tmp_path / "et", prefix="ddp")
    args = [
        "sweep",
        "--from-trace",
        str(tmp_path / "et"),
        "--layers",
        "4",
        "--workers",
        "1",
        "-o",
        str(tmp_path / "t.csv"),
        "--json",
    ]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    doc = orjson.loads(out.stdout)["result"]
    jsonschema.validate(doc, schemas.load("sweep"))
    assert [p["key"] for p in doc["plans"]] == ["traced", "layers4"]
    bad = CliRunner().invoke(cli, [*args[:3], "--gpus", "8", "-o", str(tmp_path / "x.csv")])
    assert bad.exit_code != 0 and "plan-sweep options" in bad.output


def test_plan_label_names_the_degrees_and_only_what_differs_from_the_defaults() -> None:
    from lumos.simulator.sweep.space import plan_label

    plain = {"tp": 4, "pp": 1, "vp": 1, "cp": 1, "dp": 16, "mbs": 2, "zero": 1}
    assert plan_label({**plain, "recompute": "none", "precision": "bf16"}) == "TP4 PP1 DP16 MBS2"
    busy = {**plain, "pp": 8, "vp": 2, "cp": 2, "zero": 3, "recompute": "full", "precision": "fp8"}
    assert plan_label(busy) == "TP4 PP8 VP2 CP2 DP16 MBS2 z3 full fp8"


def test_ray_and_the_local_pool_give_the_same_table_with_the_real_estimator(
    tmp_path: Path,
) -> None:
    # the fake-work test above checks the engine; this one runs the real estimate in
    # Ray's workers (model and system YAML read there, results pickled back)
    pytest.importorskip("ray", reason="Ray is the optional lumos[ray] extra")
    space = SweepSpace(
        model="gpt3-350m",
        gpus=8,
        gbs=16,
        seq=1024,
        tp=(1, 2),
        pp=(1, 2),
        mbs=(1, 2),
        recompute=("none",),
    )
    local = sweep(space, tmp_path / "local.csv", workers=2)
    ray_run = sweep(space, tmp_path / "ray.csv", workers=2, executor="ray")
    assert len(local.rows) == 8 and local.failed == ray_run.failed == 0
    assert all(r["tokens_per_s_per_gpu"] > 0 for r in local.rows)
    assert (tmp_path / "ray.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()
