"""The column-wise graph build and the one-pass tar load agree with the plain reading of
the ETs: node order, dependency indices (deduplicated, in order), dangling dependencies,
duplicate ids, and every field of the real resnet_dp ranks."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.converters.chakra.attrs import make_attr
from lumos.converters.chakra.files import find_et_sources
from lumos.errors import TraceFormatError
from lumos.proto import pb
from lumos.simulator.graph import COMP
from lumos.simulator.graph_build import graph_from_et
from lumos.simulator.load import load_graphs
from tests.conftest import fixture_path

RESNET = "astra-sim/inputs/workload/ASTRA-sim-2.0/resnet_dp.tar"


def _node(node_id: int, data: tuple[int, ...] = (), ctrl: tuple[int, ...] = ()) -> pb.Node:
    node = pb.Node(id=node_id, name=f"n{node_id}", type=COMP, duration_micros=node_id)
    node.data_deps.extend(data)
    node.ctrl_deps.extend(ctrl)
    node.attr.append(make_attr("dur_ns", node_id * 10))
    return node


def test_unsorted_ids_are_sorted_and_deps_become_unique_indices_in_order() -> None:
    nodes = [_node(30, data=(10, 20, 10), ctrl=(20, 5)), _node(10), _node(20, ctrl=(10,)), _node(5)]
    g = graph_from_et(0, pb.GlobalMetadata(), nodes)
    assert g.ids.tolist() == [5, 10, 20, 30]
    assert g.dur_ns.tolist() == [50, 100, 200, 300]
    assert g.dur_us_ns.tolist() == [5000, 10000, 20000, 30000]
    assert [g.deps(i).tolist() for i in range(4)] == [[], [], [1], [1, 2, 0]]
    assert g.dep_idx.dtype == np.int32 and g.dep_ptr.tolist() == [0, 0, 0, 1, 4]


def test_dangling_dependency_is_named_or_counted_per_occurrence_with_repair() -> None:
    nodes = [_node(1), _node(2, data=(7, 1), ctrl=(7,))]
    with pytest.raises(TraceFormatError, match=r"rank 3 node 2 'n2' depends on node 7"):
        graph_from_et(3, pb.GlobalMetadata(), nodes)
    g = graph_from_et(3, pb.GlobalMetadata(), nodes, repair=True)
    assert g.dropped_deps == 2
    assert g.deps(1).tolist() == [0]


def test_duplicate_id_is_refused() -> None:
    with pytest.raises(TraceFormatError, match="node id 4 appears twice"):
        graph_from_et(0, pb.GlobalMetadata(), [_node(4), _node(4)])


def test_tar_read_in_one_pass_matches_reading_each_rank() -> None:
    path = fixture_path(RESNET)
    loaded = load_graphs(path)
    sources = find_et_sources(path)
    assert [g.rank for g in loaded] == [s.rank for s in sources] == list(range(64))
    for source in sources[::21]:
        with source.open() as reader:
            g = graph_from_et(source.rank, reader.metadata, reader, source.path)
        other = loaded[source.rank]
        assert other.source == source.path and other.names == g.names
        for name in ("ids", "type", "dur_us_ns", "dep_ptr", "dep_idx", "comm_size", "pg_label"):
            assert np.array_equal(getattr(other, name), getattr(g, name)), name
