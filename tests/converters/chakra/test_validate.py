"""The validator reports exactly the real problems of the fixtures, and each bad-file case."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.stream import write_et
from lumos.converters.chakra.validate import validate_sources
from lumos.proto import pb
from tests.conftest import FIXTURES, fixture_path

MICRO = "astra-sim/examples/workload/microbenchmarks"


def codes(target: Path) -> Counter[str]:
    return Counter(p.code for p in validate_sources(find_et_sources(target)).problems)


@pytest.mark.parametrize(
    "target",
    [
        *(
            f"{MICRO}/{c}/{n}npus_1MB/{c}"
            for c in ("all_reduce", "all_gather", "all_to_all", "reduce_scatter")
            for n in (4, 8, 16)
        ),
        "astra-sim/examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB/custom_allreduce",
        "astra-sim-artifacts/examples/T2D-analytical/trace/trace",
    ],
)
def test_clean_fixtures_have_no_problems(target: str) -> None:
    if not FIXTURES.exists():
        fixture_path(target)
    assert codes(FIXTURES / target) == Counter()


def test_resnet_dp_all_reduces_lack_comm_size_and_nothing_else() -> None:
    report = validate_sources(
        find_et_sources(fixture_path("astra-sim/inputs/workload/ASTRA-sim-2.0/resnet_dp.tar"))
    )
    assert Counter(p.code for p in report.problems) == Counter({"comm-size-missing": 64 * 54})
    first = report.problems[0]
    assert first.node_id == 55 and first.node_name == "COMM_COLL_NODE_fc1000_ALLREDUCE"
    assert "Resnet50_DataParallel.0.et" in first.path


def test_chakra_feeder_et_problems(chakra_et: Path) -> None:
    report = validate_sources(find_et_sources(chakra_et))
    got = Counter(p.code for p in report.problems)
    # The old converter's known defects: comm ops as CPU COMM nodes without type/size,
    # dependencies on the dropped root (id 3) and on dropped launch calls, a kernel<->op cycle.
    assert got == Counter(
        {
            "dangling-dep": 51,
            "comm-cpu": 14,
            "comm-type-missing": 14,
            "comm-size-missing": 14,
            "cycle": 1,
        }
    )
    cycle = next(p for p in report.problems if p.code == "cycle")
    assert "3317 'aten::mul(0)' -> 3318" in cycle.message


def _node(i: int, deps: list[int] = (), **kw: object) -> pb.Node:  # type: ignore[assignment]
    n = pb.Node(id=i, name=f"op{i}", type=pb.COMP_NODE, duration_micros=1, **kw)  # type: ignore[arg-type]
    n.data_deps.extend(deps)
    return n


def test_dangling_dependency_names_node(tmp_path: Path) -> None:
    write_et(tmp_path / "d.0.et", None, [_node(1), _node(2, [7])])
    p, cut = validate_sources(find_et_sources(tmp_path / "d.0.et")).problems
    assert (
        p.code == "dangling-dep" and p.node_id == 2 and p.node_name == "op2" and "id 7" in p.message
    )
    # id 7 is beyond the last id of a file that states no node_count: a sign of a cut
    assert cut.code == "cut-short" and "above its last id 2 (7)" in cut.message


def test_cycle_is_named(tmp_path: Path) -> None:
    write_et(
        tmp_path / "c.0.et", None, [_node(1, [3]), _node(2, [1]), _node(3, [2]), _node(4, [3])]
    )
    (p,) = validate_sources(find_et_sources(tmp_path / "c.0.et")).problems
    assert p.code == "cycle" and "3 node(s) lie on cycles and 1 more wait" in p.message


def test_duplicate_ids_and_uint64_comm_size(tmp_path: Path) -> None:
    coll = pb.Node(id=2, name="ar", type=pb.COMM_COLL_NODE)
    coll.attr.add(name="comm_type", int64_val=0)
    coll.attr.add(name="comm_size", uint64_val=1024)
    write_et(tmp_path / "u.0.et", None, [_node(1), _node(1), coll])
    got = Counter(p.code for p in validate_sources(find_et_sources(tmp_path / "u.0.et")).problems)
    assert got == Counter({"dup-id": 1, "attr-type": 1})


def test_collective_mismatch_across_ranks(tmp_path: Path) -> None:
    for rank, size in ((0, 1024), (1, 2048)):
        coll = pb.Node(id=1, name=f"ar{rank}", type=pb.COMM_COLL_NODE)
        coll.attr.add(name="comm_type", int64_val=0)
        coll.attr.add(name="comm_size", int64_val=size)
        write_et(tmp_path / f"m.{rank}.et", None, [coll])
    (p,) = validate_sources(find_et_sources(tmp_path / "m")).problems
    assert p.code == "coll-mismatch" and p.node_name == "ar1" and "(0, 2048)" in p.message
