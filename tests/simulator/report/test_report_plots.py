"""Plots of the report: the dependency-free HTML page always, PNGs with the plot extra."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lumos.errors import MissingExtraError
from lumos.simulator.report.plots import write_plots
from lumos.simulator.report.summary import build_report
from tests.simulator.report.cases import late_peer_rank, overlap_rank, simulated


def test_html_page_has_a_bar_per_rank_and_the_critical_path(tmp_path: Path) -> None:
    result = simulated(overlap_rank(), late_peer_rank())
    (page,) = write_plots(build_report(result), result, tmp_path / "run", png=False)
    text = page.read_text()
    assert page.name == "run.breakdown.html"
    assert text.count('<td class="bar">') == 2
    assert 'width:40.000%;background:#4c72b0" title="exposed compute: 40 ns"' in text
    assert "<td>long_cpu</td>" in text


def test_png_without_matplotlib_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = simulated(overlap_rank())
    with pytest.raises(MissingExtraError, match=r"lumos\[plot\]"):
        write_plots(build_report(result), result, tmp_path / "run")
    assert (tmp_path / "run.breakdown.html").exists()


def test_pngs_are_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    result = simulated(overlap_rank(), late_peer_rank())
    paths = write_plots(build_report(result), result, tmp_path / "run")
    assert [p.name for p in paths] == [
        "run.breakdown.html",
        "run.breakdown.png",
        "run.timeline.png",
    ]
    for p in paths[1:]:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000


def test_report_page_states_what_was_simulated_and_labels_the_slowest_rank(
    tmp_path: Path,
) -> None:
    from lumos import __version__

    result = simulated(overlap_rank(), late_peer_rank())
    report = build_report(result)
    context = {"inputs": "ets/", "hardware": "h100: HGX H100 nodes"}
    (page,) = write_plots(report, result, tmp_path / "run", png=False, context=context)
    text = page.read_text()
    for fact in ("ets/", "h100: HGX H100 nodes", report.mode, __version__):
        assert f"<td>{fact}</td>" in text, fact
    slowest = report.slowest_rank
    assert f"Timeline of the slowest rank: rank {slowest}" in text
    assert f"<td>{slowest} (slowest)</td>" in text
    rank = result.rank(slowest)
    drawn = int((rank.tasks.end_ns > rank.tasks.start_ns).sum())
    assert text.count("<rect ") == drawn  # every non-empty slice of that rank
    assert "GPU compute" in text and "communication" in text  # the timeline's legend
    # self-contained: no script, no stylesheet or image fetched from anywhere
    assert "<script" not in text and "<link" not in text and "src=" not in text
