"""Simulated vs measured on our own gloo captures (tests/data/captures): convert, replay,
compare with the Kineto ProfilerStep — the replay-accuracy target is ≤ 5% per trace."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from lumos.converters.pytorch.convert import convert
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.report.summary import build_report
from lumos.simulator.report.timeline import write_timeline
from lumos.simulator.run import simulate
from tests.conftest import DATA

#: capture → measured ProfilerStep per rank (ns), read from its Kineto traces
MEASURED = {"ddp": (45_129_310, 46_302_093), "fsdp": (246_592_614, 198_367_000)}


@pytest.mark.parametrize("capture", sorted(MEASURED))
def test_replay_of_capture_within_five_percent(capture: str, tmp_path: Path) -> None:
    convert([DATA / "captures" / capture], tmp_path, prefix=capture)
    prefix = tmp_path / capture
    result = simulate(prefix)
    comparison = compare(result, read_measured(prefix))
    measured = tuple(r.measured_ns for r in comparison.ranks)
    assert measured == pytest.approx(MEASURED[capture], abs=1000)
    for rank in comparison.ranks:
        assert rank.error_pct is not None and abs(rank.error_pct) <= 5.0
        busiest = max(rank.processors, key=lambda p: p.measured_busy_ns)
        assert busiest.name.startswith("thread ")
        assert (
            abs(busiest.simulated_busy_ns - busiest.measured_busy_ns)
            <= 0.01 * busiest.measured_busy_ns
        )

    report = build_report(result)
    for rank in report.ranks:
        assert rank.breakdown.basis == "cpu"
        assert sum(rank.breakdown.parts().values()) == rank.iteration_time_ns
    assert report.critical_path is not None
    assert report.critical_path.total_ns == result.iteration_time_ns

    count = write_timeline(result, tmp_path / "run.json")
    trace = orjson.loads((tmp_path / "run.json").read_bytes())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert count == len(events) == sum(len(r.tasks) for r in result.ranks)
    assert {e["pid"] for e in events} == {0, 1}
    names = [e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"]
    assert all(n.startswith("thread ") for n in names)
