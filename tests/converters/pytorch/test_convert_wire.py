"""The hand-encoded node bytes are exactly what protobuf builds, and parallel paths agree."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from lumos.converters.chakra.stream import iter_frames, read_et
from lumos.converters.pytorch import forked, writer
from lumos.converters.pytorch.comm import groups_from
from lumos.converters.pytorch.comm_tasks import CommContext
from lumos.converters.pytorch.convert import convert
from lumos.converters.pytorch.exec_graph import build_tasks
from lumos.converters.pytorch.host_et import load_host_et
from lumos.converters.pytorch.host_graph import build_host_tasks
from lumos.converters.pytorch.json_stream import TraceFile, expand_inputs
from lumos.converters.pytorch.kineto import load_kineto
from lumos.converters.pytorch.link import link
from lumos.converters.pytorch.steps import choose_step
from lumos.converters.pytorch.tasks import finalize
from lumos.converters.pytorch.writer import NodeSource, encode_nodes, node_message
from lumos.proto import pb
from tests.conftest import fixture_path

INPUTS = "param/et_replay/tests/inputs"


def _dlrm_source() -> NodeSource:
    host = next(
        f
        for f in expand_inputs([fixture_path(f"{INPUTS}/dlrm_pytorch_et.tar.gz")])
        if f.name == "dlrm_eg_0.json"
    )
    kin = next(
        f
        for f in expand_inputs([fixture_path(f"{INPUTS}/dlrm_kineto.tar.gz")])
        if f.name.startswith("worker0_")
    )
    h, k = load_host_et(host), load_kineto(kin)
    groups = {n: g.ranks for n, g in groups_from([], k.distributed, 8).items()}
    window = choose_step(k, kin.path)
    table = build_tasks(k, window, link(h, k).host_row, CommContext(0, 8, groups, h))
    finalize(table, window.start)
    return NodeSource(table, window.start, False, k, h)


def _host_only_source() -> NodeSource:
    h = load_host_et(TraceFile(str(fixture_path(f"{INPUTS}/resnet_et.json.gz"))))
    table, _ = build_host_tasks(h, CommContext(0, 2, {"0": (0, 1)}, h))
    finalize(table, 0)
    return NodeSource(table, 0, True, None, h)


def _check_against_protobuf(src: NodeSource, block: int) -> int:
    tables = writer._Tables(src)
    n = len(src.table)
    frames = b"".join(
        encode_nodes(src, tables, lo, min(lo + block, n)) for lo in range(0, n, block)
    )
    payloads = [p for _, p in iter_frames(io.BytesIO(frames), "mem")]
    assert len(payloads) == n
    for row, payload in enumerate(payloads):
        expected = node_message(src, row)
        assert pb.Node.FromString(payload) == expected, f"node {row + 1}"
        assert payload == expected.SerializeToString(deterministic=True), f"node {row + 1}"
    return n


def test_dlrm_nodes_encode_exactly_as_protobuf() -> None:
    src = _dlrm_source()
    assert _check_against_protobuf(src, 1000) == len(src.table) > 4000
    kinds = {pb.Node.FromString(node_message(src, r).SerializeToString()).type for r in range(50)}
    assert pb.COMP_NODE in kinds


def test_host_only_nodes_encode_exactly_as_protobuf() -> None:
    src = _host_only_source()
    assert _check_against_protobuf(src, 4096) > 1000
    comm = [node_message(src, r) for r in range(len(src.table))]
    assert sum(n.type == pb.COMM_COLL_NODE for n in comm) == 7


@pytest.mark.skipif(not forked.available(), reason="needs fork and two cores")
def test_split_write_matches_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = _dlrm_source()
    monkeypatch.setattr(writer, "BLOCK_ROWS", 512)
    meta = pb.GlobalMetadata(version="0.0.4")
    writer.write_et_file(tmp_path / "serial.et", meta, src, split=False)
    writer.write_et_file(tmp_path / "split.et", meta, src, split=True)
    assert (tmp_path / "split.et").read_bytes() == (tmp_path / "serial.et").read_bytes()
    assert not list(tmp_path.glob("*.part")) and not list(tmp_path.glob("*.tmp"))


@pytest.mark.skipif(not forked.available(), reason="needs fork and two cores")
def test_jobs_and_forked_kineto_side_match_serial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lumos.converters.pytorch import convert as convert_module

    inputs = [fixture_path(f"{INPUTS}/dlrm_pytorch_et.tar.gz")]
    inputs.append(fixture_path(f"{INPUTS}/dlrm_kineto.tar.gz"))
    serial = convert(inputs, tmp_path / "serial", prefix="d")
    jobs = convert(inputs, tmp_path / "jobs", prefix="d", jobs=2)
    monkeypatch.setattr(convert_module, "PARALLEL_MIN_BYTES", 0)
    forked_rank = convert(inputs, tmp_path / "fork", prefix="d")
    for rank in range(8):
        want = (tmp_path / "serial" / f"d.{rank}.et").read_bytes()
        assert (tmp_path / "jobs" / f"d.{rank}.et").read_bytes() == want
        assert (tmp_path / "fork" / f"d.{rank}.et").read_bytes() == want
    assert [s.to_json() | {"path": ""} for s in jobs.ranks] == [
        s.to_json() | {"path": ""} for s in serial.ranks
    ]
    assert forked_rank.problems == serial.problems == []
    _, nodes = read_et(tmp_path / "fork" / "d.0.et")
    assert len(nodes) == serial.ranks[0].nodes
