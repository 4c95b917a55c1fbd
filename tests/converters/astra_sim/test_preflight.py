"""Every way an ASTRA-sim bundle breaks: a deliberately broken input gives the documented
error (rank, node, what to change) and no bundle — or, where the export repairs it, the
repair is reported and the pre-flight still refuses a bundle that has the problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lumos.converters.astra_sim.preflight import preflight_bundle
from lumos.converters.astra_sim.workload import ExportOptions
from lumos.converters.chakra.attrs import attr_field, attrs_dict, set_attr
from lumos.converters.chakra.stream import read_et, write_et
from lumos.errors import ExportError
from lumos.proto import pb
from tests.conftest import fixture_path
from tests.converters.astra_sim.test_export import (
    MICRO,
    RING,
    all_reduce,
    export,
    gpu,
    node,
    write_trace,
)

RESNET = "astra-sim/inputs/workload/ASTRA-sim-2.0/resnet_dp.tar"


def refused(tmp_path: Path, ranks: list[list[pb.Node]], *match: str, **kw: Any) -> str:
    """Export inline ranks, expect ExportError containing every `match`, and no bundle."""
    trace = write_trace(tmp_path / "in", ranks)
    with pytest.raises(ExportError) as info:
        export(trace, tmp_path / "b", **kw)
    text = str(info.value)
    for part in match:
        assert part in text, text
    assert not (tmp_path / "b").exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp folder
    return text


def good_bundle(tmp_path: Path) -> Path:
    export(fixture_path(MICRO.format(kind="all_reduce", n=4)), tmp_path / "b")
    return tmp_path / "b"


def rewrite(path: Path, edit: Any) -> None:
    meta, nodes = read_et(path)
    for n in nodes:
        edit(n)
    write_et(path, meta, nodes)


# -- refused at export --------------------------------------------------------------------


def test_resnet_dp_all_reduce_without_comm_size_is_named(tmp_path: Path) -> None:
    with pytest.raises(ExportError) as info:
        export(fixture_path(RESNET), tmp_path / "b", hw="a100")
    text = str(info.value)
    assert "64 of 64 ranks refused" in text
    assert "rank 0 node 55 'COMM_COLL_NODE_fc1000_ALLREDUCE': no comm_size" in text
    assert "rank 0: 54 problem(s)" in text and "set comm_size (int64" in text
    assert not (tmp_path / "b").exists()


def test_dependency_on_absent_id(tmp_path: Path) -> None:
    rank = [gpu(1), all_reduce(2, deps=(1, 99))]
    refused(
        tmp_path,
        [rank, [gpu(1), all_reduce(2, deps=(1,))]],
        "rank 0 node 2 'ar2': depends on id 99, which is not in",
        "not found in index",
    )


def test_cycle(tmp_path: Path) -> None:
    rank = [gpu(1, deps=(3,)), gpu(2, deps=(1,)), gpu(3, deps=(2,)), all_reduce(4)]
    refused(
        tmp_path,
        [rank, [gpu(1), all_reduce(4)]],
        "rank 0: dependency cycle (3 nodes never become ready",
        "rank 0 node 1 'k1' -> rank 0 node 3 'k3' -> rank 0 node 2 'k2' -> rank 0 node 1",
    )


def test_unsupported_collective_type_refused_or_replayed(tmp_path: Path) -> None:
    gather = node(5, "gather", pb.COMM_COLL_NODE, comm_type=pb.GATHER, dur_us=3)
    after = gpu(6, deps=(5,))  # a dependent of the refused node: no KeyError, a refusal
    ranks = [[gpu(1), gather, after], [gpu(1), gather, after]]
    refused(
        tmp_path,
        ranks,
        "rank 0 node 5 'gather': ASTRA-sim cannot run a GATHER",
        "rank 1 node 5 'gather'",
        "--replay-unsupported-comms",
    )
    summary = export(
        tmp_path / "in", tmp_path / "ok", options=ExportOptions(replay_unsupported_comms=True)
    )
    assert any("GATHER replayed by its duration" in str(f) for f in summary.fixes)
    _, nodes = read_et(tmp_path / "ok" / "workload" / "t.0.et")
    attrs = attrs_dict(nodes[1])
    # comm_size is written even without one in the trace: ASTRA-sim reads it first
    assert attrs["comm_type"] == pb.BROADCAST and attrs["comm_size"] == 0
    assert nodes[1].duration_micros == 3


def test_barrier_becomes_a_small_all_reduce_of_its_group(tmp_path: Path) -> None:
    """A gloo/NCCL barrier (no comm_size, a dependent after it) exports as an ALL_REDUCE
    of 4 B over its members, with or without --replay-unsupported-comms."""
    barrier = node(5, "barrier", pb.COMM_COLL_NODE, comm_type=pb.BARRIER, dur_us=3)
    ranks = [[gpu(1), barrier, gpu(6, deps=(5,))] for _ in range(2)]
    write_trace(tmp_path / "in", ranks)
    for flag in (False, True):
        out = tmp_path / f"b{flag}"
        summary = export(tmp_path / "in", out, options=ExportOptions(replay_unsupported_comms=flag))
        assert summary.preflight.collectives == 2
        _, nodes = read_et(out / "workload" / "t.1.et")
        attrs = attrs_dict(nodes[1])
        assert (attrs["comm_type"], attrs["comm_size"]) == (pb.ALL_REDUCE, 4)
        assert "BARRIER becomes an ALL_REDUCE of 4 B" in (out / "README.md").read_text()


def test_nothing_to_simulate(tmp_path: Path) -> None:
    cpu_only = [node(1, "cpu", pb.COMP_NODE, is_cpu_op=True, dur_us=5)]
    refused(tmp_path / "a", [cpu_only, cpu_only], "rank 0", "nothing ASTRA-sim can run")
    zero = [gpu(1, dur_us=0), gpu(2, dur_us=0, deps=(1,))]
    refused(tmp_path / "z", [zero, zero], "nothing to simulate", "0-cycle run")


def test_sub_group_collectives_differ_across_ranks(tmp_path: Path) -> None:
    ranks = [
        [all_reduce(1, size=1024, pg_ranks=[0, 1])],
        [all_reduce(1, size=2048, pg_ranks=[0, 1])],
        [gpu(1)],
        [gpu(1)],
    ]
    refused(
        tmp_path,
        ranks,
        "group [0, 1]: collective #1 differs: rank 0 node 0 'ar1' "
        "(ALL_REDUCE, 1024 B) vs rank 1 node 0 'ar1' (ALL_REDUCE, 2048 B)",
        hw="h100",
    )


def test_sub_group_collective_missing_on_one_member(tmp_path: Path) -> None:
    ranks = [
        [all_reduce(1, pg_ranks=[0, 1]), all_reduce(2, deps=(1,), pg_ranks=[0, 1])],
        [all_reduce(1, pg_ranks=[0, 1])],
        [gpu(1)],
        [gpu(1)],
    ]
    refused(
        tmp_path,
        ranks,
        "rank 0 issues 2 collectives, rank 1 issues 1",
        "rank 0's node 1 'ar2' (ALL_REDUCE, 1048576 B) has no partner",
    )


def test_collectives_of_two_groups_in_opposite_orders_would_hang(tmp_path: Path) -> None:
    world = [0, 1, 2]
    ranks = [
        [all_reduce(1, pg_ranks=[0, 1]), all_reduce(2, deps=(1,), pg_ranks=world)],
        [all_reduce(1, pg_ranks=world), all_reduce(2, deps=(1,), pg_ranks=[0, 1])],
        [all_reduce(1, pg_ranks=world)],
    ]
    refused(
        tmp_path,
        ranks,
        "can never run",
        "ASTRA-sim hangs",
        "rank 0 node 0 'ar1'",
        network_file=_network(tmp_path, 3),
        system_file=_system(tmp_path, 1, 1, 1),
    )


def test_send_recv_that_do_not_pair(tmp_path: Path) -> None:
    send = node(1, "send", pb.COMM_SEND_NODE, comm_dst=1, comm_tag=7, comm_size=64)
    recv = node(1, "recv", pb.COMM_RECV_NODE, comm_src=0, comm_tag=8, comm_size=64)
    refused(
        tmp_path,
        [[send], [recv]],
        "rank 0 node 0 'send': send 0->1 tag 7 size 64 B has no matching recv",
        "rank 1 has recvs 0->1 with (tag, size) (8, 64)",
        "rank 1 node 0 'recv': recv 0->1 tag 8 size 64 B has no matching send",
    )


def test_send_without_destination(tmp_path: Path) -> None:
    send = node(1, "send", pb.COMM_SEND_NODE, comm_tag=7, comm_size=64)
    refused(tmp_path, [[send], [gpu(1)]], "rank 0 node 1 'send': send without comm_dst")


def test_comm_node_marked_cpu_is_repaired_loudly_or_refused_in_strict(tmp_path: Path) -> None:
    ranks = [[gpu(1), all_reduce(2, deps=(1,), is_cpu_op=True)]] * 2
    trace = write_trace(tmp_path / "in", ranks)
    summary = export(trace, tmp_path / "b")
    assert [str(f) for f in summary.fixes] == [
        f"rank {r} node 2 'ar2': communication node had is_cpu_op=true (ASTRA-sim throws "
        "'Comm node should not be on CPU'); written as false"
        for r in (0, 1)
    ]
    assert "is_cpu_op=true" in (tmp_path / "b" / "README.md").read_text()
    with pytest.raises(ExportError, match="strict export refuses to repair"):
        export(trace, tmp_path / "s", options=ExportOptions(strict=True))
    assert not (tmp_path / "s").exists()


def test_uint64_comm_size_converted_to_int64_and_said(tmp_path: Path) -> None:
    ar = all_reduce(2)
    set_attr(ar, "comm_size", 1 << 20, "uint64_val")
    trace = write_trace(tmp_path / "in", [[ar], [ar]])
    summary = export(trace, tmp_path / "b")
    assert "comm_size stored as uint64_val; rewritten as int64_val" in str(summary.fixes[0])
    _, nodes = read_et(tmp_path / "b" / "workload" / "t.0.et")
    size = next(a for a in nodes[0].attr if a.name == "comm_size")
    assert attr_field(size) == "int64_val" and size.int64_val == 1 << 20


# -- refused by the pre-flight on a bundle that has the problem ---------------------------


def test_preflight_refuses_cpu_comm_node_and_uint64_size(tmp_path: Path) -> None:
    bundle = good_bundle(tmp_path)
    preflight_bundle(bundle)

    def breakit(n: pb.Node) -> None:
        set_attr(n, "is_cpu_op", True)
        set_attr(n, "comm_size", 1 << 20, "uint64_val")

    rewrite(bundle / "workload" / "all_reduce.2.et", breakit)
    with pytest.raises(ExportError) as info:
        preflight_bundle(bundle)
    text = str(info.value)
    assert "rank 2 node 0 'all_reduce_4npus_1MB': is_cpu_op=true" in text
    assert "rank 2 node 0 'all_reduce_4npus_1MB': comm_size stored as uint64_val" in text


def test_preflight_refuses_reserved_group_and_unknown_pg_name(tmp_path: Path) -> None:
    bundle = good_bundle(tmp_path)
    (bundle / "comm_group.json").write_text(json.dumps({"0": [0, 1, 2, 3]}))
    rewrite(bundle / "workload" / "all_reduce.1.et", lambda n: set_attr(n, "pg_name", "0.0"))
    with pytest.raises(ExportError) as info:
        preflight_bundle(bundle)
    text = str(info.value)
    assert "group id '0' is reserved" in text
    assert "rank 1 node 0 'all_reduce_4npus_1MB': pg_name '0.0' is not in comm_group.json" in text


def test_preflight_refuses_missing_rank_file(tmp_path: Path) -> None:
    bundle = good_bundle(tmp_path)
    (bundle / "workload" / "all_reduce.3.et").unlink()
    with pytest.raises(ExportError, match=r"network\.yml has 4 NPUs but workload/ has 3 rank"):
        preflight_bundle(bundle)


def _network(tmp_path: Path, *counts: int) -> Path:
    path = tmp_path / f"net{len(counts)}.yml"
    n = len(counts)
    path.write_text(
        f"topology: [ {', '.join(['Ring'] * n)} ]\nnpus_count: [ {', '.join(map(str, counts))} ]\n"
        f"bandwidth: [ {', '.join(['50'] * n)} ]\nlatency: [ {', '.join(['500'] * n)} ]\n"
    )
    return path


def _system(tmp_path: Path, dims: int, chunks: int, splits: int) -> Path:
    path = tmp_path / f"sys{dims}_{chunks}_{splits}.json"
    ring = ["ring"] * dims
    path.write_text(
        json.dumps(
            {
                "scheduling-policy": "LIFO",
                "endpoint-delay": 10,
                "active-chunks-per-dimension": chunks,
                "preferred-dataset-splits": splits,
                "all-reduce-implementation": ring,
                "all-gather-implementation": ring,
                "reduce-scatter-implementation": ring,
                "all-to-all-implementation": ring,
                "collective-optimization": "localBWAware",
                "local-mem-bw": 50,
            }
        )
    )
    return path


def test_active_chunks_below_splits_refused_on_two_dimensions(tmp_path: Path) -> None:
    target = fixture_path(MICRO.format(kind="all_reduce", n=8))
    with pytest.raises(ExportError) as info:
        export(
            target,
            tmp_path / "b",
            network_file=_network(tmp_path, 4, 2),
            system_file=_system(tmp_path, 2, 1, 4),
        )
    assert "active-chunks-per-dimension 1 < preferred-dataset-splits 4 on a 2-dimensional" in str(
        info.value
    ) and "#370" in str(info.value)
    assert not (tmp_path / "b").exists()
    # the error names the bundle asked for, not the staging folder it no longer has
    assert f"pre-flight of {tmp_path / 'b'} failed" in str(info.value)
    assert "lumos-staging" not in str(info.value)
    # one dimension: chunks simply run back to back (ASTRA-sim's own Ring_4chunks example)
    summary = export(
        target,
        tmp_path / "one",
        network_file=_network(tmp_path, 8),
        system_file=_system(tmp_path, 1, 1, 4),
    )
    assert any("run back to back" in note for note in summary.notes)


def test_rank_count_must_match_the_network(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="the trace has 8 ranks but the network has 4 NPUs"):
        export(
            fixture_path(RING),
            tmp_path / "b",
            network_file=_network(tmp_path, 4),
            system_file=_system(tmp_path, 1, 4, 4),
        )
