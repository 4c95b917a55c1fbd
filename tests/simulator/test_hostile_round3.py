"""Hostile input, round 3: what `simulate` (and the library under it) did with round 2's
leftovers.

Before: a Chakra `dur_ns` of exactly -1 was read as lumos' own "none given" and the node
ran for its `duration_micros` (exit 0); an ET of an unknown schema version simulated
without a word (`et validate` warns); a 10^15 µs kernel in a 4 ms measured step was
replayed as a 31-year step without a word; `lumos.simulator.run.simulate(path)` ran half
of an 8-rank set; and a rank file of millions of tiny nodes was read whatever its count
(2 million 11-byte nodes: 1.1 GB at simulate's peak).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.chakra.attrs import make_attr
from lumos.converters.chakra.stream import write_et
from lumos.errors import RankSetError, ResourceLimitError
from lumos.proto import pb
from lumos.simulator.run import SimOptions, simulate
from tests.converters.astra_sim.test_export import all_reduce, gpu, write_trace
from tests.converters.chakra.test_rank_sets import write_set


def _simulate(target: Path, *more: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["simulate", str(target), *more])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def _with_dur_ns(node: pb.Node, value: int) -> pb.Node:
    node.attr.append(make_attr("dur_ns", value))
    return node


@pytest.mark.parametrize(
    "bad",
    [_with_dur_ns(gpu(2), -1), _with_dur_ns(all_reduce(2), -1)],
    ids=["column-reader", "protobuf-reader"],  # a collective is read by protobuf
)
def test_dur_ns_minus_one_is_not_read_as_no_duration(tmp_path: Path, bad: pb.Node) -> None:
    """-1 was lumos' internal "no dur_ns given": the kernel ran its 10 µs
    `duration_micros`, exit 0. A file saying -1 is as negative as -100."""
    bad.data_deps.append(1)
    good = all_reduce(2, deps=(1,)) if bad.type == pb.COMM_COLL_NODE else gpu(2, deps=(1,))
    folder = write_trace(tmp_path / "et", [[gpu(1), bad], [gpu(1), good]])
    code, out = _simulate(folder)
    assert code == 3, out
    assert "t.0.et" in out and "rank 0 node 2" in out and "dur_ns is negative (-1)" in out


def test_no_dur_ns_still_takes_duration_micros(tmp_path: Path) -> None:
    """The marker's own meaning stays: no `dur_ns` at all is `duration_micros` x 1000."""
    folder = write_trace(tmp_path / "et", [[gpu(1, dur_us=7), gpu(2, dur_us=5, deps=(1,))]])
    result = simulate(folder, SimOptions())
    assert result.ranks[0].iteration_time_ns == 12_000


def test_unknown_et_version_is_a_note_naming_the_files(tmp_path: Path) -> None:
    """simulate read version 9.9.9 as its own without a word; validate warned."""
    folder = tmp_path / "et"
    folder.mkdir()
    for rank in range(2):
        write_et(folder / f"t.{rank}.et", pb.GlobalMetadata(version="9.9.9"), [gpu(1)])
    code, out = _simulate(folder)
    assert code == 0, out
    assert "t.0.et and 1 more rank file(s): Chakra schema version '9.9.9'" in out
    assert "is not one lumos knows" in out
    known = write_trace(tmp_path / "ok", [[gpu(1)], [gpu(1)]])  # 0.0.4: no note
    assert "schema version" not in _simulate(known)[1]


def _with_step(folder: Path, rank: int, nodes: list[pb.Node], step_ns: int) -> None:
    meta = pb.GlobalMetadata(version="0.0.4")
    meta.attr.append(make_attr("measured_step_ns", step_ns))
    write_et(folder / f"t.{rank}.et", meta, nodes)


def test_kernel_longer_than_its_measured_step_is_reported_naming_it(tmp_path: Path) -> None:
    """A 10^15 µs kernel inside a 4 ms step replayed as a 10^9 s step, exit 0, no word."""
    folder = tmp_path / "et"
    folder.mkdir()
    _with_step(folder, 0, [gpu(1), gpu(2, dur_us=10**15, deps=(1,))], 4_000_000)
    _with_step(folder, 1, [gpu(1), gpu(2, deps=(1,))], 4_000_000)
    result = simulate(folder, SimOptions())
    (note,) = [n for n in result.notes if "measured step" in n]
    assert "t.0.et: rank 0 node 2 'k2' lasts 1,000,000,000,000,000,000 ns" in note
    assert "(4,000,000 ns)" in note and "likely a unit slip or a clock jump" in note
    code, out = _simulate(folder)
    assert code == 0 and "longer than the rank's whole measured step" in out


def test_kernels_within_their_step_get_no_note(tmp_path: Path) -> None:
    folder = tmp_path / "et"
    folder.mkdir()
    _with_step(folder, 0, [gpu(1, dur_us=3_000), gpu(2, dur_us=1_000, deps=(1,))], 4_000_000)
    assert not [n for n in simulate(folder, SimOptions()).notes if "measured step" in n]


def test_library_simulate_refuses_a_partial_set_like_the_cli(tmp_path: Path) -> None:
    """`lumos.simulator.run.simulate(path)` simulated 4 of 8 ranks without complaint while
    `lumos simulate` and `lumos.simulate` refused; `allow_partial` is the same opt-in."""
    folder = write_set(tmp_path / "set", 8, ranks=[0, 1, 2, 3])
    with pytest.raises(RankSetError, match="4 of 8 ranks are missing: 4-7"):
        simulate(folder, SimOptions())
    result = simulate(folder, SimOptions(allow_partial=True))
    assert [r.rank for r in result.ranks] == [0, 1, 2, 3]
    assert any(n.startswith("simulated a partial set: 4 of 8") for n in result.notes)
    picked = simulate(folder, SimOptions(ranks=frozenset({0, 1})))  # --ranks: a subset
    assert [r.rank for r in picked.ranks] == [0, 1]


def test_library_simulate_refuses_mixed_runs_even_with_allow_partial(tmp_path: Path) -> None:
    folder = write_set(tmp_path / "set", 4, set_id="run-a")
    write_set(folder, 4, ranks=[2], set_id="run-b")
    with pytest.raises(RankSetError, match="different conversions are mixed"):
        simulate(folder, SimOptions(allow_partial=True))


def test_rank_file_of_millions_of_nodes_is_a_limit(tmp_path: Path, monkeypatch: Any) -> None:
    """Nodes are counted as frames are decoded: 3,000 nodes under a limit of 1,000 stop at
    the first chunk (the default, 8.4 million, bounds simulate at ~4.7 GB)."""
    folder = tmp_path / "et"
    folder.mkdir()
    nodes = [gpu(1)] + [gpu(i, dur_us=1, deps=(i - 1,)) for i in range(2, 3_001)]
    write_et(folder / "t.0.et", None, nodes)
    monkeypatch.setenv("LUMOS_MAX_RANK_NODES", "1000")
    with pytest.raises(ResourceLimitError, match="LUMOS_MAX_RANK_NODES") as caught:
        simulate(folder, SimOptions())
    assert "t.0.et: nodes of one rank's ET is 3,000" in str(caught.value)
    code, out = _simulate(folder)
    assert code == 7 and "LUMOS_MAX_RANK_NODES" in out
    monkeypatch.setenv("LUMOS_MAX_RANK_NODES", "3000")
    assert simulate(folder, SimOptions()).ranks[0].iteration_time_ns == 10_000 + 2_999_000
