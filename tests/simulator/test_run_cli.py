"""`lumos simulate` end to end: JSON shape, timeline file, ASTRA-sim configs."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from lumos.cli.main import cli
from tests.conftest import fixture_path


def test_simulate_json_and_timeline(tmp_path: Path) -> None:
    trace = fixture_path("astra-sim-artifacts/examples/T2D-analytical/trace")
    out = tmp_path / "t.json"
    res = CliRunner().invoke(cli, ["simulate", str(trace), "--json", "--timeline", str(out)])
    assert res.exit_code == 0, res.output
    data = orjson.loads(res.output)["result"]
    assert data["mode"] == "replay"
    assert len(data["ranks"]) == 16
    assert data["iteration_time_ns"] == max(r["iteration_time_ns"] for r in data["ranks"])
    assert data["ranks"][3]["iteration_time_ns"] == 100_000
    assert out.stat().st_size > 0


def test_simulate_with_astra_sim_configs() -> None:
    ex = fixture_path("astra-sim/examples")
    res = CliRunner().invoke(
        cli,
        [
            "simulate",
            str(ex / "workload/microbenchmarks/all_reduce/8npus_1MB"),
            "--astra-sim-system",
            str(ex / "system/native_collectives/HGX-H100-validated.json"),
            "--astra-sim-network",
            str(ex / "network/analytical/HGX-H100-validated.yml"),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    data = orjson.loads(res.output)["result"]
    assert data["mode"] == "astra"
    assert 10_000 < data["iteration_time_ns"] < 1_000_000


def test_simulate_writes_plots(tmp_path: Path) -> None:
    """`--plot PREFIX` writes the HTML breakdown (and PNGs when matplotlib is present)."""
    et = fixture_path("astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB")
    result = CliRunner().invoke(cli, ["simulate", str(et), "--plot", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    html = (tmp_path / "p.breakdown.html").read_text()
    assert "exposed transfer" in html.lower() and "wait for peers" in html.lower()
    assert "idle (starved)" in html.lower() and "rank" in html.lower()
    assert f"plot: {tmp_path / 'p.breakdown.html'}" in result.output
