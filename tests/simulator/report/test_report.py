"""The report record, its JSON, and the rich summary, on hand-made runs."""

from __future__ import annotations

import io

import orjson
from rich.console import Console

from lumos.simulator.report.summary import build_report, fmt_ns, render_summary
from tests.simulator.report.cases import late_peer_rank, overlap_rank, simulated


def test_report_json_has_iteration_times_breakdown_and_critical_path() -> None:
    report = build_report(simulated(overlap_rank(), late_peer_rank()), top=3)
    out = orjson.loads(orjson.dumps(report.to_dict()))
    assert out["iteration_time_ns"] == 100
    assert [r["iteration_time_ns"] for r in out["ranks"]] == [100, 100]
    assert out["ranks"][0]["breakdown"] == {
        "exposed_compute_ns": 40,
        "overlapped_ns": 30,
        "exposed_transfer_ns": 20,
        "peer_wait_ns": 0,  # the all-reduce's wait [40,50) runs under the gemm
        "backlog_ns": 0,
        "idle_ns": 10,
        "basis": "gpu",
    }
    assert out["critical_path"]["total_ns"] == 100
    assert len(out["critical_path"]["top"]) == 2
    assert report.slowest_rank == 0


def test_summary_renders_ranks_and_contributors() -> None:
    report = build_report(simulated(overlap_rank(), late_peer_rank()))
    console = Console(file=io.StringIO(), width=140, record=True)
    render_summary(report, console)
    text = console.export_text()
    assert "Simulated step (replay): 100 ns" in text
    assert "Critical path: 100 ns, through rank(s) 1, 0" in text
    assert "long_cpu" in text and "40 ns  40.0%" in text


def test_fmt_ns_picks_a_readable_unit() -> None:
    assert [fmt_ns(v) for v in (950, 12_345, 3_500_000, 2_000_000_000, None)] == [
        "950 ns",
        "12.345 µs",
        "3.500 ms",
        "2.000 s",
        "-",
    ]
