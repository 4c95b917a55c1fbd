"""Values no real run has are refused when a rank is loaded, never priced as something else.

`et validate` called these errors while `simulate` priced them: a negative `dur_ns` as
0 ns, a negative `comm_size` as 0 bytes, a `comm_type` outside Chakra's enum as some
collective, and a `duration_micros` past 2^63 ns wrapped modulo 2^64 (a 2^62 µs kernel
took 0 ns, or any other number). The fast column reader and protobuf (every collective,
and odd nodes) must agree, so each case runs on both kinds of node.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.chakra.attrs import make_attr
from lumos.proto import pb
from tests.converters.astra_sim.test_export import all_reduce, gpu, write_trace


def _simulate(folder: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["simulate", str(folder), "--hw", "h100"])
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    return result.exit_code, result.output


def _with(node: pb.Node, name: str, value: int, field: str | None = None) -> pb.Node:
    for attr in node.attr:
        if attr.name == name:
            attr.CopyFrom(make_attr(name, value, field))
            return node
    node.attr.append(make_attr(name, value, field))
    return node


def _trace(tmp_path: Path, bad: pb.Node) -> Path:
    """Two ranks, rank 0's second node `bad` (id 2); rank 1 the same with good values."""
    good = all_reduce(2, deps=(1,)) if bad.type == pb.COMM_COLL_NODE else gpu(2, deps=(1,))
    bad.data_deps.append(1)
    return write_trace(tmp_path / "et", [[gpu(1), bad], [gpu(1), good]])


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (_with(gpu(2), "dur_ns", -100), "dur_ns is negative (-100)"),
        (_with(all_reduce(2), "dur_ns", -100), "dur_ns is negative (-100)"),
        (gpu(2, dur_us=2**62), "duration_micros 4611686018427387904 µs is past"),
        (
            all_reduce(2, dur_us=2**62),
            "duration_micros 4611686018427387904 µs is past",
        ),
        (all_reduce(2, size=-(1 << 20)), "comm_size -1048576 is not a byte count"),
        (
            _with(all_reduce(2), "comm_size", 2**64 - 1, "uint64_val"),
            "comm_size 18446744073709551615 is not a byte count",
        ),
        (_with(all_reduce(2), "comm_type", 99), "comm_type 99 is not a Chakra collective"),
    ],
    ids=[
        "neg-dur-fast",
        "neg-dur-protobuf",
        "huge-duration-fast",
        "huge-duration-protobuf",
        "neg-size",
        "size-2^64",
        "type-99",
    ],
)
def test_values_no_run_has_are_refused_naming_the_node(
    tmp_path: Path, bad: pb.Node, message: str
) -> None:
    folder = _trace(tmp_path, bad)
    code, output = _simulate(folder)
    assert code == 3, output
    assert "t.0.et" in output and "rank 0 node 2" in output and message in output


def test_good_values_beside_them_still_simulate(tmp_path: Path) -> None:
    """The same two ranks with rank 0 like rank 1: the refusals are about the value."""
    folder = _trace(tmp_path, all_reduce(2))
    code, output = _simulate(folder)
    assert code == 0, output
