"""Conversion of the other real fixtures: Kineto-only (sync events), host-only, captures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.stream import read_et
from lumos.converters.chakra.validate import validate_sources
from lumos.converters.pytorch.convert import convert
from lumos.proto import pb
from tests.conftest import DATA, fixture_path

HTA = "HolisticTraceAnalysis/tests/data"


def _convert(
    paths: list[Path], out: Path, cross_rank: bool = True
) -> list[tuple[pb.GlobalMetadata, list[pb.Node]]]:
    result = convert(paths, out, prefix="t")
    # Several fixtures are one or two sampled ranks of a bigger job: the set is partial
    # by design (reported as a warning), the files themselves must be clean.
    report = validate_sources(find_et_sources(out / "t"), allow_partial=True)
    errors = [p for p in report.errors if cross_rank or not p.code.startswith("coll-")]
    assert [str(p) for p in errors] == []
    return [read_et(out / f"t.{s.rank}.et") for s in result.ranks]


def test_event_sync_trace_has_sync_edges(tmp_path: Path) -> None:
    path = fixture_path(f"{HTA}/critical_path/cuda_event_sync/event_sync_trace.json.gz")
    ((meta, nodes),) = _convert([path], tmp_path)
    assert attrs_dict(meta)["measured_step_ns"] == 3_154_000
    by_id = {n.id: n for n in nodes}
    syncs = {n.name: n for n in nodes if "sync_kind" in attrs_dict(n)}
    assert set(syncs) == {"cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize"}
    event_sync = attrs_dict(syncs["cudaEventSynchronize"])
    assert (event_sync["sync_kind"], event_sync["sync_event"], event_sync["sync_stream"]) == (
        "event",
        8,
        7,
    )
    waited = [
        by_id[i].name
        for i in syncs["cudaEventSynchronize"].data_deps
        if by_id[i].name != "cudaEventRecord"
    ]
    assert any("spin_kernel" in name for name in waited)
    stream_sync = syncs["cudaStreamSynchronize"]
    assert [by_id[i].name for i in stream_sync.data_deps] == ["Memcpy DtoH (Device -> Pageable)"]
    record = next(
        n for n in nodes if n.name == "cudaEventRecord" and "event_record" in attrs_dict(n)
    )
    assert attrs_dict(record)["event_record"] == 8


def test_alexnet_event_record_wait_edge_across_streams(tmp_path: Path) -> None:
    path = fixture_path(
        f"{HTA}/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
    )
    ((_, nodes),) = _convert([path], tmp_path)
    by_id = {n.id: n for n in nodes}
    cross = []
    for n in nodes:
        stream = attrs_dict(n).get("stream")
        for dep in n.data_deps:
            other = attrs_dict(by_id[dep]).get("stream")
            if stream is not None and other is not None and other != stream:
                cross.append((by_id[dep].name.split("<")[0], other, n.name.split("<")[0], stream))
    assert ("void fft2d_r2c_32x32", 20, "ampere_gcgemm_64x64_nt", 20) not in cross
    assert len(cross) == 6
    assert (
        "void at::native::(anonymous namespace)::max_pool_forward_nchw",
        7,
        "void fft2d_r2c_32x32",
        20,
    ) in cross or any(
        src_stream == 7 and dst_stream == 20 for _, src_stream, _, dst_stream in cross
    )
    assert any(src_stream == 20 and dst_stream == 7 for _, src_stream, _, dst_stream in cross)


def test_hta_two_sampled_ranks_and_nccl_trace(tmp_path: Path) -> None:
    # two ranks sampled out of 128: their NCCL sequences really differ (other groups)
    ranks = _convert([fixture_path(f"{HTA}/trace_filter")], tmp_path / "tf", cross_rank=False)
    assert [attrs_dict(m)["rank"] for m, _ in ranks] == [0, 1]
    assert all(attrs_dict(m)["world_size"] == 128 for m, _ in ranks)
    assert [sum(n.type == pb.COMM_COLL_NODE for n in nodes) for _, nodes in ranks] == [5, 5]
    ((meta, nodes),) = _convert(
        [fixture_path(f"{HTA}/nccl_parser_config/nccl_data.json.gz")], tmp_path / "n"
    )
    colls = [attrs_dict(n) for n in nodes if n.type == pb.COMM_COLL_NODE]
    assert len(colls) == 7
    assert [c["comm_type"] for c in colls] == [pb.BROADCAST] * 2 + [pb.ALL_REDUCE] * 5
    assert all(c["pg_ranks"] == [0, 1] for c in colls)
    assert colls[2]["comm_size"] == 2_049_000 * 4
    assert attrs_dict(meta)["process_groups"] == '{"0":[0,1]}'


def test_tracelens_h100_kineto_only(tmp_path: Path) -> None:
    path = fixture_path("TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz")
    ((meta, nodes),) = _convert([path], tmp_path)
    assert sum(not attrs_dict(n)["is_cpu_op"] for n in nodes) == 61
    assert attrs_dict(meta)["measured_step_ns"] == 4_426_114


def test_simple_add_pair_links_all_ops(tmp_path: Path) -> None:
    result = convert([fixture_path(f"{HTA}/execution_trace")], tmp_path, prefix="t")
    (summary,) = result.ranks
    assert summary.link is not None and summary.link.linked == summary.link.host_ops == 36
    assert summary.gpu == 4


@pytest.mark.parametrize(
    ("path", "schema_nodes", "colls"),
    [
        ("astra-sim/my_test/inputs/workload/result/eg.rank_0.pt.trace.json.gz", None, 7),
        ("chakra/tests/data/1.0.2-chakra.0.0.4.tgz", None, 10),
        ("param/et_replay/tests/inputs/resnet_et.json.gz", None, 7),
    ],
)
def test_host_only_converts_with_estimated_durations(
    tmp_path: Path, path: str, schema_nodes: int | None, colls: int
) -> None:
    ((_, nodes),) = _convert([fixture_path(path)], tmp_path)
    comm = [n for n in nodes if n.type == pb.COMM_COLL_NODE]
    assert len(comm) == colls
    comp = [n for n in nodes if n.type == pb.COMP_NODE]
    assert comp and all(attrs_dict(n)["dur_estimated"] for n in comp)
    assert sum(bool(n.inputs.shapes) for n in comp) > len(comp) // 2


def test_captures_gloo_collectives_and_p2p(tmp_path: Path) -> None:
    captures = DATA / "captures"
    if not (captures / "pipeline").exists():
        pytest.skip("captures not committed")
    ranks = _convert([captures / "pipeline"], tmp_path / "p")
    sends = [
        (attrs_dict(n)["comm_src"], attrs_dict(n)["comm_dst"], attrs_dict(n)["comm_tag"])
        for _, nodes in ranks
        for n in nodes
        if n.type == pb.COMM_SEND_NODE
    ]
    recvs = [
        (attrs_dict(n)["comm_src"], attrs_dict(n)["comm_dst"], attrs_dict(n)["comm_tag"])
        for _, nodes in ranks
        for n in nodes
        if n.type == pb.COMM_RECV_NODE
    ]
    assert sorted(sends) == sorted(recvs) == [(0, 1, 0), (0, 1, 1), (1, 0, 100), (1, 0, 101)]
    ddp = _convert([captures / "ddp"], tmp_path / "d")
    for _, nodes in ddp:
        colls = [attrs_dict(n) for n in nodes if n.type == pb.COMM_COLL_NODE]
        assert [c["comm_size"] for c in colls] == [165_632, 133_376, 133_632, 41_472]
        assert all(c["tid"] >= 0 and "is_cpu_op" not in c for c in colls)


def _thread(nodes: list[pb.Node]) -> dict[int, tuple[str, int, int, int | None, list[int]]]:
    """Node id → (name, start_ns, dur_ns, gap_ns, ctrl_deps)."""
    out = {}
    for n in nodes:
        a = attrs_dict(n)
        out[n.id] = (n.name, a["start_ns"], a["dur_ns"], a.get("gap_ns"), list(n.ctrl_deps))
    return out


def test_pipeline_gloo_send_runs_before_its_c10d_send(tmp_path: Path) -> None:
    """gloo hands the buffer over when `c10d::send` starts; its `gloo:send` annotation
    starts only as the call ends (3.0 ms later on rank 1). The SEND goes first, at the
    call's start, with the call's gap; the call follows it, shifted by the SEND's length."""
    ranks = _convert([DATA / "captures" / "pipeline"], tmp_path)
    nodes = {n.id: n for n in ranks[1][1]}
    info = _thread(ranks[1][1])
    # before: 1236 → c10d::send 1237 (start 21_164_157, gap 74_950) → gloo:send 1238 → 1239
    assert info[1237] == ("gloo:send", 21_164_157, 34_995, 74_950, [1236])
    assert info[1238] == ("c10d::send", 21_164_157 + 34_995, 3_017_704, 0, [1237])
    assert info[1239][0] == "aten::ones_like" and info[1239][3:] == (111_829, [1238])
    assert nodes[1237].type == pb.COMM_SEND_NODE
    for _, rank_nodes in ranks:
        by_id = {n.id: n for n in rank_nodes}
        after = {d: n for n in rank_nodes for d in n.ctrl_deps}
        sends = [n for n in rank_nodes if n.type == pb.COMM_SEND_NODE]
        assert len(sends) == 2
        assert all(after[s.id].name == "c10d::send" for s in sends)
        assert all(attrs_dict(after[s.id])["gap_ns"] == 0 for s in sends)
        # receives stay after their c10d::recv_
        recvs = [n for n in rank_nodes if n.type == pb.COMM_RECV_NODE]
        assert [by_id[r.ctrl_deps[0]].name for r in recvs] == ["c10d::recv_"] * 2


def test_gloo_send_right_after_its_c10d_send_moves_before_it(tmp_path: Path) -> None:
    """A `gloo:send` that starts after its `c10d::send` returned (same thread) also goes
    first, and takes the call's peer and tag; the idle µs between them fall into the gap
    of the op after."""

    def op(name: str, ts: int, dur: int, cat: str = "cpu_op", **args: object) -> dict[str, object]:
        return {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "dur": dur,
            "args": args,
        }

    events = [
        op("ProfilerStep#1", 1000, 100, "user_annotation"),
        op("aten::mul", 1005, 3),
        op("c10d::send", 1010, 10, **{"Concrete Inputs": ["", "", "1", "7"]}),
        op("aten::empty", 1011, 1),
        op(
            "gloo:send",
            1021,
            3,
            "user_annotation",
            **{"Input Dims": [[4]], "Input type": ["float"]},
        ),
        op("aten::add", 1030, 2),
    ]
    trace = {
        "schemaVersion": 1,
        "distributedInfo": {"rank": 0, "world_size": 2},
        "traceEvents": events,
    }
    path = tmp_path / "rank0.kineto.json"
    path.write_text(json.dumps(trace))
    ((_, nodes),) = _convert([path], tmp_path / "out", cross_rank=False)
    chain = sorted(_thread(nodes).values(), key=lambda t: t[1])
    assert chain == [
        ("aten::mul", 5_000, 3_000, 5_000, []),
        ("gloo:send", 10_000, 3_000, 2_000, [1]),
        ("c10d::send", 13_000, 1_000, 0, [2]),
        ("aten::empty", 14_000, 1_000, 0, [3]),
        ("c10d::send", 15_000, 8_000, 0, [4]),
        ("aten::add", 30_000, 2_000, 7_000, [5]),
    ]
    send = attrs_dict(next(n for n in nodes if n.type == pb.COMM_SEND_NODE))
    peer = (send["comm_src"], send["comm_dst"], send["comm_tag"], send["comm_size"])
    assert peer == (0, 1, 7, 16)
