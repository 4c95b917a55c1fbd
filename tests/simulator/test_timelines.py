"""A run that keeps no per-node times (`timelines=False`, `lumos simulate --no-timelines`)
gives the same steps and breakdowns as a full run, holds no graphs or task rows, and
refuses the outputs that draw per-node times."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import lumos
from lumos.cli.main import cli
from lumos.converters.pytorch.convert import convert
from lumos.simulator.report.summary import build_report
from lumos.simulator.run import SimOptions, simulate

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def ddp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our 2-rank gloo DDP capture, converted (CPU threads, all-reduces, recorded times)."""
    out = tmp_path_factory.mktemp("ddp")
    convert([DATA / "captures" / "ddp"], out, prefix="t")
    return out / "t"


def test_no_timelines_keeps_steps_and_breakdowns(ddp: Path) -> None:
    full = simulate(ddp)
    lean = simulate(ddp, SimOptions(timelines=False))
    assert full.timelines and not lean.timelines
    assert lean.graphs == [] and len(full.graphs) == 2
    assert [len(r.tasks) for r in lean.ranks] == [0, 0]
    assert min(len(r.tasks) for r in full.ranks) > 1000
    assert lean.iteration_time_ns == full.iteration_time_ns
    full_report, lean_report = build_report(full), build_report(lean)
    for a, b in zip(full_report.ranks, lean_report.ranks, strict=True):
        assert (a.rank, a.iteration_time_ns, a.gpu_inclusive_ns) == (
            b.rank,
            b.iteration_time_ns,
            b.gpu_inclusive_ns,
        )
        assert a.breakdown == b.breakdown
        assert sum(b.breakdown.parts().values()) == b.breakdown.iteration_ns > 0
    assert full_report.critical_path is not None and full_report.critical_path.steps
    assert lean_report.critical_path is None


def test_no_timelines_folded_ranks_share_their_representatives_breakdown(ddp: Path) -> None:
    """Folding finds no identical ranks in a real capture; the per-rank breakdowns are
    each rank's own (rank field included) either way."""
    lean = simulate(ddp, SimOptions(timelines=False, fold=True))
    assert [r.breakdown.rank for r in lean.ranks if r.breakdown] == [0, 1]


def test_api_ops_table_needs_timelines(ddp: Path) -> None:
    sim = lumos.simulate(ddp, timelines=False)
    assert sim.report.critical_path is None
    assert "critical_path" not in sim.to_json()
    with pytest.raises(ValueError, match="a run with timelines"):
        sim.to_pandas("ops")


def test_cli_no_timelines(ddp: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    full = runner.invoke(cli, ["simulate", str(ddp), "--json"])
    lean = runner.invoke(cli, ["simulate", str(ddp), "--json", "--no-timelines"])
    assert full.exit_code == 0 and lean.exit_code == 0, lean.output
    a, b = orjson.loads(full.output)["result"], orjson.loads(lean.output)["result"]
    assert a["ranks"] == b["ranks"]
    assert "critical_path" in a and "critical_path" not in b
    bad = runner.invoke(
        cli, ["simulate", str(ddp), "--no-timelines", "--timeline", str(tmp_path / "t.json")]
    )
    assert bad.exit_code == 2
    assert "--no-timelines" in bad.output
    assert not (tmp_path / "t.json").exists()
