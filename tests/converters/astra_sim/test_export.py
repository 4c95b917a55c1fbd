"""ASTRA-sim export on real fixtures and small inline traces: bundles, mapping, readback."""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.astra_sim.export import ExportRequest, ExportSummary, export_astra_sim
from lumos.converters.astra_sim.workload import CpuGaps, ExportOptions
from lumos.converters.chakra.attrs import attr_field, attrs_dict, make_attr
from lumos.converters.chakra.stream import read_et, write_et
from lumos.proto import pb
from tests.conftest import fixture_path

MICRO = "astra-sim/examples/workload/microbenchmarks/{kind}/{n}npus_1MB"
RING = "astra-sim/examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB"
T2D = "astra-sim-artifacts/examples/T2D-analytical/trace"
T2D_GROUPS = "astra-sim-artifacts/examples/T2D-analytical/inputs/comm_group.json"
BUNDLE_FILES = {
    "comm_group.json",
    "system.json",
    "network.yml",
    "memory.json",
    "run.sh",
    "README.md",
    ".lumos-bundle",  # the marker that lets --force replace this folder
}


def export(target: Path | str, out: Path, **kw: Any) -> ExportSummary:
    kw.setdefault("hw", "h100")
    return export_astra_sim(ExportRequest(str(target), out, **kw))


def node(nid: int, name: str, ntype: int, deps: tuple[int, ...] = (), **attrs: Any) -> pb.Node:
    """A node for inline traces; `dur_us` sets duration_micros, the rest become attributes."""
    n = pb.Node(id=nid, name=name, type=ntype, duration_micros=attrs.pop("dur_us", 0))
    n.data_deps.extend(deps)
    n.attr.extend(make_attr(key, value) for key, value in attrs.items())
    return n


def write_trace(folder: Path, ranks: list[list[pb.Node]], prefix: str = "t") -> Path:
    """Write per-rank inline ETs as <folder>/<prefix>.<rank>.et; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank, nodes in enumerate(ranks):
        write_et(folder / f"{prefix}.{rank}.et", None, nodes)
    return folder


def all_reduce(nid: int, size: int = 1 << 20, deps: tuple[int, ...] = (), **kw: Any) -> pb.Node:
    return node(
        nid, f"ar{nid}", pb.COMM_COLL_NODE, deps, comm_type=pb.ALL_REDUCE, comm_size=size, **kw
    )


def gpu(nid: int, dur_us: int = 10, deps: tuple[int, ...] = (), **kw: Any) -> pb.Node:
    return node(nid, f"k{nid}", pb.COMP_NODE, deps, dur_us=dur_us, is_cpu_op=False, **kw)


# -- real fixtures ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
def test_microbenchmark_exports_one_collective_per_rank(kind: str, tmp_path: Path) -> None:
    summary = export(fixture_path(MICRO.format(kind=kind, n=8)), tmp_path / "b")
    bundle = tmp_path / "b"
    assert {p.name for p in bundle.iterdir()} == BUNDLE_FILES | {"workload"}
    assert sorted(p.name for p in (bundle / "workload").iterdir()) == [
        f"{kind}.{r}.et" for r in sorted(range(8), key=str)
    ]
    assert summary.preflight.collectives == 8 and summary.preflight.nodes == 8
    for rank in range(8):
        meta, nodes = read_et(bundle / "workload" / f"{kind}.{rank}.et")
        assert meta.version == "0.0.4"
        (only,) = nodes
        attrs = attrs_dict(only)
        assert attrs["comm_size"] == 1048576 and attrs["is_cpu_op"] is False
        assert attr_field(next(a for a in only.attr if a.name == "comm_size")) == "int64_val"
        assert "pg_name" not in attrs and attrs["involved_dim"] == [True]
    assert json.loads((bundle / "comm_group.json").read_text()) == {}


def test_run_script_and_configs_spell_out_every_flag_and_key(tmp_path: Path) -> None:
    export(fixture_path(MICRO.format(kind="all_reduce", n=16)), tmp_path / "b")
    bundle = tmp_path / "b"
    script = (bundle / "run.sh").read_text()
    for flag in (
        "--workload-configuration=workload/all_reduce",
        "--system-configuration=system.json",
        "--network-configuration=network.yml",
        "--remote-memory-configuration=memory.json",
        "--comm-group-configuration=comm_group.json",
    ):
        assert flag in script
    assert os.access(bundle / "run.sh", os.X_OK)
    system = json.loads((bundle / "system.json").read_text())
    assert system["active-chunks-per-dimension"] >= system["preferred-dataset-splits"] == 4
    assert len(system) == 13 and system["all-reduce-implementation"] == ["ring", "ring"]
    network = (bundle / "network.yml").read_text()
    # 16 ranks on 8-GPU H100 nodes: NVLink switch of 8, fabric of 2 nodes; GB/s of 2^30 B.
    assert "npus_count: [ 8, 2 ]" in network and "topology: [ Switch, Switch ]" in network
    assert "bandwidth: [ 345.754, 42.841 ]" in network  # 450e9*0.825 and 50e9*0.92 B/s
    assert json.loads((bundle / "memory.json").read_text()) == {
        "memory-type": "NO_MEMORY_EXPANSION"
    }


def test_custom_ring_send_recv_pair_with_int32_peers(tmp_path: Path) -> None:
    summary = export(fixture_path(RING), tmp_path / "b")
    assert summary.kept == {"send": 112, "recv": 112, "GPU compute": 56}
    assert summary.preflight.sends == summary.preflight.recvs == 112
    _, nodes = read_et(tmp_path / "b" / "workload" / "custom_allreduce.3.et")
    sends = [n for n in nodes if n.type == pb.COMM_SEND_NODE]
    recvs = [n for n in nodes if n.type == pb.COMM_RECV_NODE]
    assert {(attrs_dict(n)["comm_src"], attrs_dict(n)["comm_dst"]) for n in sends} == {(3, 4)}
    assert {(attrs_dict(n)["comm_src"], attrs_dict(n)["comm_dst"]) for n in recvs} == {(2, 3)}
    for n in sends + recvs:
        fields = {a.name: attr_field(a) for a in n.attr}
        assert fields["comm_src"] == fields["comm_dst"] == fields["comm_tag"] == "int32_val"
        assert "comm_type" not in fields  # the source's comm_type=5 on p2p is meaningless
    assert all(d < n.id for n in nodes for d in (*n.data_deps, *n.ctrl_deps))


def test_t2d_groups_get_ids_from_one_and_matching_dims(tmp_path: Path) -> None:
    summary = export(fixture_path(T2D), tmp_path / "b", comm_groups_file=fixture_path(T2D_GROUPS))
    groups = json.loads((tmp_path / "b" / "comm_group.json").read_text())
    assert sorted(map(int, groups)) == list(range(1, 9))
    assert any('group "0"' in note for note in summary.notes)
    _, nodes = read_et(tmp_path / "b" / "workload" / "trace.0.et")
    first, _, last = nodes
    # rank 0's pg_name "0.0" is std::stoi 0 = the input file's group "0" = ranks 0..3.
    assert groups[attrs_dict(first)["pg_name"]] == [0, 1, 2, 3]
    assert groups[attrs_dict(last)["pg_name"]] == [0, 4, 8, 12]
    # H100: 16 ranks = 8 x 2; ranks 0..3 stay in dim 0, 0/4/8/12 cross both dims.
    assert attrs_dict(first)["involved_dim"] == [True, False]
    assert attrs_dict(last)["involved_dim"] == [True, True]


def _mlc_read(path: Path) -> tuple[Any, list[Any]]:
    from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata, Node
    from chakra.src.third_party.utils.protolib import decodeMessage, openFileRd

    handle = openFileRd(str(path))
    meta = GlobalMetadata()
    decodeMessage(handle, meta)
    nodes = []
    while True:
        n = Node()
        if not decodeMessage(handle, n):
            break
        nodes.append(n)
    handle.close()
    return meta, nodes


@pytest.mark.parametrize(
    ("name", "target", "groups"),
    [
        ("micro", MICRO.format(kind="all_gather", n=16), None),
        ("ring", RING, None),
        ("t2d", T2D, T2D_GROUPS),
    ],
)
def test_bundle_reads_back_identically_with_mlc_chakra(
    name: str, target: str, groups: str | None, tmp_path: Path
) -> None:
    if importlib.util.find_spec("chakra") is None:
        if os.environ.get("CI"):
            pytest.fail("mlc-chakra must be installed in CI")
        pytest.skip("mlc-chakra not installed (pip install --no-deps mlc-chakra==1.0.0)")
    export(
        fixture_path(target),
        tmp_path / name,
        comm_groups_file=fixture_path(groups) if groups else None,
    )
    files = sorted((tmp_path / name / "workload").iterdir())
    assert files
    for path in files:
        ours_meta, ours = read_et(path)
        theirs_meta, theirs = _mlc_read(path)
        assert theirs_meta.SerializeToString() == ours_meta.SerializeToString()
        assert [n.SerializeToString() for n in theirs] == [n.SerializeToString() for n in ours]
        assert len(theirs) == len(ours) > 0


# -- mapping on inline traces -------------------------------------------------------------


def _our_style_rank(world: int) -> list[pb.Node]:
    """A lumos-convert-like rank: a CPU thread launching kernels on two streams + a collective.

    Times (ns): cpu 0-5000 launch A (stream 7, 6000-16000); cpu sync waits A; cpu
    20000-22000 launches B (stream 7, 30000-40000) and C (stream 9, 23000-24000);
    all-reduce on stream 9 after C (24500-44500).
    """

    def cpu(nid: int, start: int, dur: int, deps: tuple[int, ...] = ()) -> pb.Node:
        return node(
            nid, f"cpu{nid}", pb.COMP_NODE, deps, is_cpu_op=True, tid=1, start_ns=start, dur_ns=dur
        )

    def kern(nid: int, stream: int, start: int, dur: int, deps: tuple[int, ...]) -> pb.Node:
        return node(
            nid,
            f"k{nid}",
            pb.COMP_NODE,
            deps,
            is_cpu_op=False,
            stream=stream,
            start_ns=start,
            dur_ns=dur,
        )

    return [
        cpu(10, 0, 5000),
        kern(11, 7, 6000, 10000, (10,)),
        cpu(12, 5000, 12000, (10, 11)),  # cudaStreamSynchronize: waits for k11
        cpu(13, 20000, 2000, (12,)),
        kern(14, 7, 30000, 10000, (13, 11)),
        kern(15, 9, 23000, 1000, (13,)),
        node(
            16,
            "nccl:all_reduce",
            pb.COMM_COLL_NODE,
            (15, 13),
            comm_type=pb.ALL_REDUCE,
            comm_size=4096,
            pg_ranks=list(range(world)),
            start_ns=24500,
            dur_ns=20000,
            stream=9,
        ),
        node(17, "meta", pb.METADATA_NODE),
    ]


def test_cpu_ops_are_folded_into_dependencies_and_streams_serialised(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "in", [_our_style_rank(2), _our_style_rank(2)])
    summary = export(trace, tmp_path / "b", options=ExportOptions(cpu_gaps=CpuGaps.DROP))
    assert summary.dropped == {"CPU op": 6, "metadata": 2}
    _, nodes = read_et(tmp_path / "b" / "workload" / "t.0.et")
    by_src = {attrs_dict(n)["source_id"]: n for n in nodes}
    # ids follow recorded start order: k11 (6000), k15 (23000), ar (24500), k14 (30000)
    assert [attrs_dict(n)["source_id"] for n in nodes] == [11, 15, 16, 14]
    k11, k15, ar, k14 = (by_src[i] for i in (11, 15, 16, 14))
    # k15 waited for cpu13 -> cpu12 (sync on k11): re-pointed to k11
    assert list(k15.data_deps) == [k11.id]
    # k14: stream order after k11, once (the CPU path to k11 is pruned, not duplicated)
    assert list(k14.data_deps) == [k11.id]
    assert sorted(ar.data_deps) == [k11.id, k15.id]  # one per stream it waited for
    assert all(attrs_dict(n)["is_cpu_op"] is False for n in nodes)


def test_idle_cpu_gaps_become_delay_nodes(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "in", [_our_style_rank(2), _our_style_rank(2)])
    summary = export(trace, tmp_path / "b")
    _, nodes = read_et(tmp_path / "b" / "workload" / "t.0.et")
    gaps = {n.name: attrs_dict(n)["dur_ns"] for n in nodes if n.name.startswith("cpu_gap")}
    # before k11: GPU idle 0-6000; before k15: k11 ends 16000, k15 starts 23000 = 7000 idle;
    # the all-reduce starts 500 ns after k15 ends (under the 1 µs threshold). k14 is ready
    # at 16000 (k11) and starts at 30000, but 16000-23000 is k15's delay already (the two
    # would queue on ASTRA-sim's one compute slot), k15 ran 23000-24000, the all-reduce's
    # 500 ns followed and the all-reduce ran 24500-30000: nothing left (it was 7500 ns).
    assert gaps == {"cpu_gap_before:k11": 6000, "cpu_gap_before:k15": 7000}
    assert summary.delays == 4 and summary.delay_ns == 2 * 13000
    k15 = next(n for n in nodes if n.name == "k15")
    gap = next(n for n in nodes if n.name == "cpu_gap_before:k15")
    assert list(k15.data_deps) == [gap.id] and gap.id == k15.id - 1


def test_fold_is_linear_on_a_long_cpu_chain(tmp_path: Path) -> None:
    """40k nodes: a CPU chain launching one kernel per step on 4 streams, synced often.

    Linear: 200k nodes took 17 s under cProfile (~80 µs per node end to end).
    """
    steps = 10_000
    nodes: list[pb.Node] = []
    for i in range(steps):
        cpu_deps = (2 * i - 2,) if i else ()
        if i % 16 == 0 and i:
            cpu_deps = (*cpu_deps, 2 * i - 1)  # a sync on the previous kernel
        nodes.append(node(2 * i, "launch", pb.COMP_NODE, cpu_deps, is_cpu_op=True, dur_us=1))
        nodes.append(
            node(2 * i + 1, "k", pb.COMP_NODE, (2 * i,), is_cpu_op=False, stream=i % 4, dur_us=5)
        )
    trace = write_trace(tmp_path / "in", [nodes, list(nodes)])
    began = (
        time.process_time()
    )  # CPU seconds of this process: other jobs on the machine do not count
    summary = export(trace, tmp_path / "b", options=ExportOptions(cpu_gaps=CpuGaps.DROP))
    elapsed = time.process_time() - began
    assert summary.preflight.compute == 2 * steps
    _, out = read_et(tmp_path / "b" / "workload" / "t.0.et")
    # every kernel waits for at most one kernel per stream (pruned frontier)
    assert max(len(n.data_deps) for n in out) <= 4
    assert elapsed < 15, f"export of 40k nodes took {elapsed:.1f} CPU s"


def test_cli_json_summary(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "export",
            "astra-sim",
            str(fixture_path(RING)),
            "-o",
            str(tmp_path / "b"),
            "--hw",
            "h100",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["result"]
    assert data["ranks"] == 8 and data["exported_nodes"] == 280
    assert data["network"]["npus_count"] == [8]
    check = CliRunner().invoke(cli, ["export", "astra-sim-check", str(tmp_path / "b")])
    assert check.exit_code == 0 and "OK, 8 ranks, 280 nodes" in check.output
