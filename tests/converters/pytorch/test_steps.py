"""Which step is converted: every ProfilerStep listed with its measured time, a stated
default (the last complete one), `--step N`; a trace without steps measured nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.errors import LinkError
from tests.conftest import fixture_path
from tests.converters.pytorch.kineto_snippet import Snippet

HTA = "HolisticTraceAnalysis/tests/data"


def _three_steps(tmp_path: Path) -> Path:
    """Steps #1..#3 of 100, 120, 90 µs; the profiler window cut #3's last kernel."""
    k = Snippet()
    for n, (start, dur) in enumerate(((1000.0, 100.0), (1100.0, 120.0), (1220.0, 90.0)), 1):
        k.step(n, start, dur)
        k.op("aten::mm", start + 10.0, 20.0)
        k.launch("gemm_kernel", start + 12.0, stream=7, start=start + 20.0, dur=10.0)
    k.runtime("cudaLaunchKernel", 1260.0, 5.0)  # its kernel is not in the trace
    return k.write(tmp_path / "rank0.json.gz")


def test_several_profiler_steps_are_listed_and_the_last_complete_is_converted(
    tmp_path: Path,
) -> None:
    path = _three_steps(tmp_path)
    rank = convert([path], tmp_path / "et", prefix="t").ranks[0]
    assert rank.step == "ProfilerStep#2" and rank.step_ns == 120_000
    assert rank.step_chosen_by == "the last complete step"
    listed = rank.to_json()["steps"]
    assert listed == [
        {"name": "ProfilerStep#1", "measured_ns": 100_000, "complete": True},
        {"name": "ProfilerStep#2", "measured_ns": 120_000, "complete": True},
        {"name": "ProfilerStep#3", "measured_ns": 90_000, "complete": False},
    ]
    picked = convert([path], tmp_path / "et1", prefix="t", step=3).ranks[0]
    assert (picked.step, picked.step_ns, picked.step_chosen_by) == (
        "ProfilerStep#3",
        90_000,
        "picked by --step",
    )
    with pytest.raises(LinkError, match=r"no ProfilerStep#7 .*ProfilerStep#1, ProfilerStep#2"):
        convert([path], tmp_path / "et2", prefix="t", step=7)
    out = CliRunner().invoke(cli, ["convert", str(path), "-o", str(tmp_path / "et3")])
    assert out.exit_code == 0, out.output
    assert (
        "steps: ProfilerStep#1 0.10 ms, ProfilerStep#2 0.12 ms, ProfilerStep#3 0.09 ms "
        "(GPU tail cut); converted ProfilerStep#2, the last complete step" in out.output
    )


def test_trace_without_profiler_step_says_nothing_measured(tmp_path: Path) -> None:
    """The whole trace is converted, but it has no measured iteration: no
    measured_step_ns in the ET, and the summary says so (it was compared with its own
    recorded span, 0.00%)."""
    k = Snippet()
    k.op("aten::mm", 1010.0, 20.0)
    k.launch("gemm_kernel", 1012.0, stream=7, start=1020.0, dur=10.0)
    path = k.write(tmp_path / "rank0.json.gz")
    rank = convert([path], tmp_path / "et", prefix="t").ranks[0]
    assert (rank.step, rank.step_ns, rank.steps) == ("whole trace", None, ())
    assert rank.step_chosen_by == "no ProfilerStep in the trace: nothing measured"
    meta, _ = read_et(tmp_path / "et" / "t.0.et")
    assert "measured_step_ns" not in attrs_dict(meta)
    out = CliRunner().invoke(cli, ["convert", str(path), "-o", str(tmp_path / "et1")])
    assert "whole trace: no ProfilerStep in the trace: nothing measured" in out.output
    assert "host ETs only" not in out.output


def test_hta_trace_with_five_steps_lists_them(tmp_path: Path) -> None:
    """HTA's rank 0 of 16 holds ProfilerStep#550..#554; all complete, #554 converted."""
    path = fixture_path(f"{HTA}/negative_queue_length_values_check/rank0.json.gz")
    rank = convert([path], tmp_path, prefix="t").ranks[0]
    assert [(s.name, s.dur, s.complete) for s in rank.steps] == [
        ("ProfilerStep#550", 209_748_000, True),
        ("ProfilerStep#551", 216_483_000, True),
        ("ProfilerStep#552", 216_119_000, True),
        ("ProfilerStep#553", 215_467_000, True),
        ("ProfilerStep#554", 216_216_000, True),
    ]
    assert (rank.step, rank.step_ns) == ("ProfilerStep#554", 216_216_000)


def test_step_median_converts_the_typical_step_after_the_first(tmp_path: Path) -> None:
    # #1 carries the profiler's start; of #2 (120 us) and #3 (90 us) the lower median is #3
    from lumos.errors import ConfigError

    path = _three_steps(tmp_path)
    rank = convert([path], tmp_path / "et", prefix="t", step="median").ranks[0]
    assert rank.step == "ProfilerStep#3" and rank.step_ns == 90_000
    result = CliRunner().invoke(
        cli, ["convert", str(path), "-o", str(tmp_path / "cli"), "--step", "median"]
    )
    assert result.exit_code == 0, result.output
    assert "converted ProfilerStep#3" in result.output
    with pytest.raises(ConfigError, match="'median'"):
        convert([path], tmp_path / "bad", prefix="t", step="mean")
