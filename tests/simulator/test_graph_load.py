"""Building rank graphs from real Chakra ETs, and load-time validation errors."""

from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np
import pytest

from lumos.converters.chakra.attrs import make_attr
from lumos.converters.chakra.stream import write_et
from lumos.errors import TraceFormatError, ValidationError
from lumos.proto import pb
from lumos.simulator.graph import COLL, COMP
from lumos.simulator.load import load_graphs
from lumos.simulator.run import SimOptions, simulate
from tests.conftest import fixture_path

T2D = "astra-sim-artifacts/examples/T2D-analytical"


def test_resnet_dp_tar_loads_64_ranks_with_expected_counts() -> None:
    graphs = load_graphs(fixture_path("astra-sim/inputs/workload/ASTRA-sim-2.0/resnet_dp.tar"))
    assert [g.rank for g in graphs] == list(range(64))
    g = graphs[0]
    assert int((g.type == COMP).sum()) == 161
    assert int((g.type == COLL).sum()) == 54
    assert g.groups == [tuple(range(64))]
    assert g.name(0) == "COMP_NODE_conv1_FWD"
    assert int(g.dur_ns[0]) == 13003 * 1000


def test_t2d_groups_from_labels_and_from_comm_group_json() -> None:
    graphs = load_graphs(fixture_path(T2D + "/trace"))
    assert graphs[5].groups == [(4, 5, 6, 7), (1, 5, 9, 13)]
    import json

    mapping = json.loads(fixture_path(T2D + "/inputs/comm_group.json").read_text())
    graphs = load_graphs(fixture_path(T2D + "/trace"), comm_groups=mapping)
    assert graphs[5].groups == [(4, 5, 6, 7), (1, 5, 9, 13)]


def _chakra0(tmp_path: Path) -> Path:
    with tarfile.open(fixture_path("chakra/tests/data/feeder_tests_trace.tar.gz")) as tar:
        data = tar.extractfile("tests/data/chakra.0.et").read()  # type: ignore[union-attr]
    (tmp_path / "chakra.0.et").write_bytes(data)
    return tmp_path


def test_chakra_feeder_trace_dangling_dep_is_named_then_repaired(tmp_path: Path) -> None:
    folder = _chakra0(tmp_path)
    with pytest.raises(TraceFormatError, match=r"rank 0 node 216 .* depends on node 3"):
        load_graphs(folder)
    result = simulate(folder, SimOptions(repair=True))
    assert len(result.ranks[0].tasks) == 3664
    assert (result.ranks[0].tasks.end_ns >= 0).all()
    assert result.iteration_time_ns > 0


def _node(nid: int, name: str, ntype: int, deps: list[int], **attrs: object) -> pb.Node:
    node = pb.Node(id=nid, name=name, type=ntype, data_deps=deps, duration_micros=5)
    node.attr.extend(make_attr(k, v) for k, v in attrs.items())
    return node


def test_cycle_is_a_validation_error_naming_nodes(tmp_path: Path) -> None:
    nodes = [_node(1, "a", COMP, [2]), _node(2, "b", COMP, [1]), _node(3, "c", COMP, [])]
    write_et(tmp_path / "t.0.et", None, nodes)
    with pytest.raises(ValidationError, match=r"cycle among 2 nodes.*rank 0 node 1 'a'"):
        simulate(tmp_path)


def test_mismatched_collectives_and_unpaired_send_are_named(tmp_path: Path) -> None:
    ar = {"comm_type": 0, "comm_size": 1024}
    write_et(tmp_path / "t.0.et", None, [_node(1, "ar0", COLL, [], **ar)])
    write_et(
        tmp_path / "t.1.et",
        None,
        [
            _node(1, "ar1", COLL, [], comm_type=0, comm_size=2048),
            _node(2, "lonely", pb.COMM_SEND_NODE, [1], comm_dst=0, comm_tag=3, comm_size=8),
        ],
    )
    with pytest.raises(ValidationError) as info:
        simulate(tmp_path)
    text = str(info.value)
    assert (
        "rank 0 node 1 'ar0' is (type 0, 1024 B) but rank 1 node 1 'ar1' is (type 0, 2048 B)"
        in text
    )
    assert "rank 1 node 2 'lonely': no matching receive (src 1, dst 0, tag 3)" in text


def test_dep_ptr_is_csr_of_node_indices() -> None:
    graphs = load_graphs(
        fixture_path("astra-sim/examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB")
    )
    g = graphs[0]
    assert len(g) == 35
    assert g.deps(1).tolist() == [0]
    assert np.all(np.diff(g.dep_ptr) >= 0)
