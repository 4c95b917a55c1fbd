"""Broken hand-built ETs that used to pass `et validate`: each gets its precise problem.

Nodes use the real Chakra layout (standard attributes in their standard value fields);
each case breaks one thing, and the validator must report exactly that code.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lumos.converters.chakra.attrs import make_attr
from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.stream import write_et
from lumos.converters.chakra.validate import validate_sources
from lumos.proto import pb


def comp(nid: int, **attrs: object) -> pb.Node:
    node = pb.Node(id=nid, name=f"op{nid}", type=pb.COMP_NODE, duration_micros=3)
    node.attr.append(make_attr("is_cpu_op", False))
    node.attr.extend(make_attr(k, v) for k, v in attrs.items())
    return node


def p2p(nid: int, kind: int, peer: int) -> pb.Node:
    node = pb.Node(id=nid, name="send" if kind == pb.COMM_SEND_NODE else "recv", type=kind)
    key = "comm_dst" if kind == pb.COMM_SEND_NODE else "comm_src"
    node.attr.extend(
        [
            make_attr("is_cpu_op", False),
            make_attr("comm_size", 64),
            make_attr("comm_tag", 1),
            make_attr(key, peer),
        ]
    )
    return node


def meta(world: int = 2, **extra: object) -> pb.GlobalMetadata:
    m = pb.GlobalMetadata(version=str(extra.pop("version", "0.0.4")))
    m.attr.append(make_attr("world_size", world))
    m.attr.extend(make_attr(k, v) for k, v in extra.items())
    return m


def two_ranks(
    tmp_path: Path, build: Callable[[int], tuple[pb.GlobalMetadata, list[pb.Node]]]
) -> dict[str, str]:
    for rank in (0, 1):
        m, nodes = build(rank)
        m.attr.append(make_attr("rank", rank))
        write_et(tmp_path / f"t.{rank}.et", m, nodes)
    report = validate_sources(find_et_sources(tmp_path))
    return {p.code: p.severity.value for p in report.problems}


CASES: dict[
    str, tuple[Callable[[int], tuple[pb.GlobalMetadata, list[pb.Node]]], dict[str, str]]
] = {
    "negative_duration": (lambda r: (meta(), [comp(1, dur_ns=-5)]), {"negative": "error"}),
    "string_duration": (lambda r: (meta(), [comp(1, dur_ns="5")]), {"attr-type": "error"}),
    "unknown_node_type": (
        lambda r: (meta(), [comp(1), pb.Node(id=2, name="x", type=42)]),
        {"node-type-unknown": "error"},
    ),
    "unknown_schema_version": (
        lambda r: (meta(version="9.9.9"), [comp(1)]),
        {"version-unknown": "warning"},
    ),
    "negative_comm_size": (
        lambda r: (
            meta(),
            [
                pb.Node(
                    id=1,
                    name="ar",
                    type=pb.COMM_COLL_NODE,
                    attr=[
                        make_attr("is_cpu_op", False),
                        make_attr("comm_type", pb.ALL_REDUCE),
                        make_attr("comm_size", -8),
                    ],
                )
            ],
        ),
        {"negative": "error"},
    ),
    "malformed_process_groups": (
        lambda r: (meta(process_groups='{"0": "all"}'), [comp(1)]),
        {"process-groups-malformed": "error"},
    ),
    "send_to_a_rank_that_does_not_exist": (
        lambda r: (
            meta(),
            [p2p(1, pb.COMM_SEND_NODE, 5) if r == 0 else p2p(1, pb.COMM_RECV_NODE, 0)],
        ),
        {"p2p-peer-unknown": "error"},
    ),
    "comm_type_in_a_list_field": (  # found by the fuzz harness: was a TypeError
        lambda r: (
            meta(),
            [
                pb.Node(
                    id=1,
                    name="ar",
                    type=pb.COMM_COLL_NODE,
                    attr=[
                        make_attr("is_cpu_op", False),
                        make_attr("comm_type", [4], "int64_list"),
                        make_attr("comm_size", 8),
                    ],
                )
            ],
        ),
        {"attr-type": "error", "comm-type-unknown": "error"},
    ),
    "two_groups_with_the_same_members": (
        lambda r: (meta(process_groups='{"a": [0, 1], "b": [0, 1]}'), [comp(1)]),
        {"pg-same-members": "warning"},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_broken_et_gets_its_precise_problem(tmp_path: Path, case: str) -> None:
    build, expected = CASES[case]
    assert two_ranks(tmp_path, build) == expected
