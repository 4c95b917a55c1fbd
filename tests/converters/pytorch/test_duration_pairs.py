"""Chrome-trace duration events written as "B"/"E" pairs instead of complete "X" events
(other profilers, or traces passed through other tools). Before, every pair was skipped
without a word: the host ops and the step marker vanished from the ET. Now each pair reads
as the complete event it stands for, and a half without its partner is counted in the
rank's notes."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.converters.pytorch.duration_pairs import DurationPairs
from lumos.errors import TraceFormatError
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import Snippet


def _step() -> Snippet:
    """A step with nested host ops, a kernel launch and a stream sync."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.op("aten::linear", 1004.0, 30.0)
    k.op("aten::mm", 1005.0, 10.0)
    k.launch("gemm", 1007.0, stream=7, start=1015.0, dur=100.0)
    k.op("aten::relu", 1040.0, 10.0)
    k.launch("relu_kernel", 1042.0, stream=7, start=1116.0, dur=20.0)
    k.runtime("cudaStreamSynchronize", 1055.0, 82.0)
    k.op("aten::zero_", 1150.0, 5.0)
    return k


def _as_pairs(events: list[dict[str, Any]], cats: tuple[str, ...]) -> list[dict[str, Any]]:
    """Each complete event of `cats` split into a "B" and an "E" at their times, sorted by
    time as a Chrome-format writer emits them (ends before begins at the same instant)."""
    out: list[tuple[float, int, dict[str, Any]]] = []
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in cats:
            b = {k: v for k, v in e.items() if k != "dur"} | {"ph": "B"}
            end = {"ph": "E", "pid": e["pid"], "tid": e["tid"], "ts": e["ts"] + e["dur"]}
            out += [(float(e["ts"]), 1, b), (float(e["ts"]) + float(e["dur"]), 0, end)]
        else:
            out.append((float(e.get("ts", 0.0)), 1, e))
    return [e for _, _, e in sorted(out, key=lambda t: (t[0], t[1]))]


def _names(path: str) -> list[str]:
    return sorted(n.name for n in read_et(path)[1])


@pytest.mark.parametrize("cats", [("cpu_op",), ("cpu_op", "user_annotation", "cuda_runtime")])
def test_duration_pairs_read_as_complete_events(tmp_path: Path, cats: tuple[str, ...]) -> None:
    """The step with its host ops (and the step marker and runtime calls) as B/E pairs
    converts to the same nodes as with X events, and replays at 0.00 %. Before: with the
    host ops as pairs, the four host ops vanished without a note and the replay read
    +20.25 %; with everything as pairs, the rank was refused as "nothing to convert"."""
    ref = _step()
    pairs = copy.deepcopy(ref)
    pairs.events = _as_pairs(pairs.events, cats)
    assert not any(e.get("ph") == "X" and e.get("cat") == "cpu_op" for e in pairs.events)
    (tmp_path / "x").mkdir()
    (tmp_path / "be").mkdir()
    a = convert([ref.write(tmp_path / "x" / "r0.json.gz")], tmp_path / "x", prefix="t")
    b = convert([pairs.write(tmp_path / "be" / "r0.json.gz")], tmp_path / "be", prefix="t")
    assert _names(b.ranks[0].path) == _names(a.ranks[0].path)
    assert "aten::linear" in _names(b.ranks[0].path)
    assert b.ranks[0].notes == [] and b.ranks[0].step_ns == a.ranks[0].step_ns
    row = compare(simulate(tmp_path / "be" / "t"), read_measured(tmp_path / "be" / "t")).ranks[0]
    assert row.error_pct is not None and abs(row.error_pct) < 0.005


def test_a_half_without_its_partner_is_counted(tmp_path: Path) -> None:
    """An "E" with nothing open and a "B" never closed: both counted in the rank's notes
    (a problem of the conversion), the rest of the step converted."""
    k = _step()
    k.events.append({"ph": "E", "pid": 1, "tid": 1, "ts": 1160.0})
    k.events.append(
        {"ph": "B", "cat": "cpu_op", "name": "aten::cut", "pid": 1, "tid": 1, "ts": 1170.0}
    )
    result = convert([k.write(tmp_path / "r0.json.gz")], tmp_path, prefix="t")
    (note,) = result.ranks[0].notes
    assert "2 'B'/'E' duration event(s) without a partner" in note and "(0 pairs were)" in note
    assert any("without a partner" in p for p in result.problems)


def test_a_malformed_begin_is_named(tmp_path: Path) -> None:
    """A "B" whose name is not a string is rejected naming the file, the event and its
    index, as a malformed complete event is."""
    k = _step()
    k.events.append({"ph": "B", "cat": "cpu_op", "name": 5, "pid": 1, "tid": 1, "ts": 1170.0})
    k.events.append({"ph": "E", "pid": 1, "tid": 1, "ts": 1175.0})
    path = k.write(tmp_path / "r0.json.gz")
    with pytest.raises(TraceFormatError) as err:
        convert([path], tmp_path / "out", prefix="t")
    assert str(path) in str(err.value) and "event 'name' is 5, not a string" in str(err.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_pairs_nest_per_thread_and_end_args_merge() -> None:
    pairs = DurationPairs()
    outer = {"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 10.0, "args": {"a": 1}}
    inner = {"ph": "B", "name": "inner", "pid": 1, "tid": 1, "ts": 12.0}
    other = {"ph": "B", "name": "other", "pid": 1, "tid": 2, "ts": 11.0}
    assert pairs.feed(outer) is None and pairs.feed(inner) is None and pairs.feed(other) is None
    first = pairs.feed({"ph": "E", "pid": 1, "tid": 1, "ts": 15.0})
    assert first is not None and (first["name"], first["ph"], first["dur"]) == ("inner", "X", 3.0)
    last = pairs.feed({"ph": "E", "pid": 1, "tid": 1, "ts": 20.0, "args": {"b": 2}})
    assert last is not None and last["name"] == "outer" and last["args"] == {"a": 1, "b": 2}
    assert pairs.paired == 2 and pairs.unpaired == 1  # "other" never ended
