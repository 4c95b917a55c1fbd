"""The columnar `.et` reader gives the same graph as protobuf + `graph_from_et`.

Hand-made ranks with the field layout our converter writes (CPU ops with tid/gap_ns/
start_ns, kernels with stream, a collective with its comm attributes and pg_ranks, runtime
syncs, an event record, a node to estimate, unsorted ids, repeated dependencies) plus
what other producers write (attributes of other value types, a repeated attribute, an
unknown Node field), read whole, in byte-range parts, in worker processes, and with a
hash that collides on every name.
"""

from __future__ import annotations

import io
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lumos.converters.chakra.attrs import make_attr
from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.stream import EtReader, write_et
from lumos.converters.chakra.varint import encode_varint
from lumos.errors import ResourceLimitError, TraceFormatError
from lumos.proto import pb
from lumos.simulator import et_names, read_ranks
from lumos.simulator.et_columns import CHUNK_BYTES, read_columns
from lumos.simulator.et_wire import MAX_FIELDS
from lumos.simulator.graph import COLL, COMP, RankGraph
from lumos.simulator.graph_build import graph_from_et
from lumos.simulator.graph_columns import graph_from_columns, parse_metadata, read_graph
from lumos.simulator.load import load_graphs, resolve_groups

FIELDS = (
    *("ids", "name_idx", "type", "is_cpu_op", "stream", "tid", "dur_ns", "dur_us_ns", "gap_ns"),
    *("start_ns", "dep_ptr", "dep_idx", "comm_type", "comm_size", "comm_peer", "comm_tag"),
    *("comm_seq", "comm_dur_ns", "pg_label", "group", "sync_kind", "sync_stream", "sync_event"),
)


def _node(i: int, name: str, deps: tuple[int, ...] = (), ctrl: tuple[int, ...] = ()) -> pb.Node:
    node = pb.Node(id=i, name=name, type=COMP, duration_micros=i % 7)
    node.data_deps.extend(deps)
    node.ctrl_deps.extend(ctrl)
    return node


def _rank(count: int) -> list[pb.Node]:
    """`count` nodes cycling through the patterns real converted ranks hold."""
    nodes = []
    for i in range(1, count + 1):
        kind = i % 12
        node = _node(
            i,
            f"op_{i % 37}" if kind else "void at::native::kernel<4>" * 9,
            (i - 1,) if i > 1 else (),
        )
        if kind in (0, 1, 2):  # CPU op as the converter writes it
            for name, value in (("is_cpu_op", True), ("tid", 7 + i % 2), ("gap_ns", i % 5 - 1)):
                node.attr.append(make_attr(name, value))
            node.attr.append(make_attr("start_ns", 1000 * i))
            node.attr.append(make_attr("dur_ns", 900 * i))
            node.attr.append(make_attr("cat", "cpu_op"))
        elif kind == 3:  # kernel
            node.attr.extend([make_attr("is_cpu_op", False), make_attr("stream", 7)])
            node.attr.append(make_attr("dur_ns", 0))
            node.attr.append(make_attr("correlation", 10 * i))
        elif kind == 4:  # collective
            node.type = COLL
            for name, value in (("comm_type", 0), ("comm_size", 1 << 20), ("pg_name", "1")):
                node.attr.append(make_attr(name, value))
            node.attr.append(make_attr("pg_ranks", [0, 1]))
            node.attr.append(make_attr("comm_seq", i // 12))
        elif kind == 5:  # runtime syncs
            node.attr.extend([make_attr("is_cpu_op", True), make_attr("sync_kind", "stream")])
            node.attr.append(make_attr("sync_stream", 7))
        elif kind == 6:
            node.attr.extend([make_attr("event_record", 3), make_attr("sync_stream", 7)])
        elif kind == 7:  # to estimate
            node.attr.append(make_attr("dur_estimated", True))
            node.inputs.shapes, node.inputs.types = "[[2,3]]", "[Tensor(float)]"
        elif kind == 8:  # other producers' value types
            node.attr.append(make_attr("stream", -3, "int32_val"))
            node.attr.append(make_attr("tid", 5, "uint64_val"))
            node.attr.append(make_attr("is_cpu_op", 1, "int64_val"))
            node.attr.append(make_attr("start_ns", 2.5, "double_val"))
        elif kind == 9:  # a repeated attribute: the last one wins
            node.attr.extend([make_attr("dur_ns", 5), make_attr("dur_ns", 6)])
            node.ctrl_deps.extend([i - 1, i - 1, 1])
        elif kind == 10:
            node.attr.append(make_attr("gap_ns", -50))
            node.attr.append(make_attr("num_ops", 10**9))
        else:  # the other sync kinds, an unknown one, and one of the wrong value type
            word = ("device", "stream_wait_event", "event", "other", 3)[(i // 12) % 5]
            field = "int64_val" if word == 3 else "string_val"
            node.attr.append(make_attr("sync_kind", word, field))
            node.attr.extend([make_attr("sync_event", 40 + i), make_attr("event_record", 9)])
        nodes.append(node)
    return nodes


def _write(path: Path, nodes: list[pb.Node], unknown_field: bool = False) -> Path:
    meta = pb.GlobalMetadata(version="0.0.4")
    meta.attr.append(make_attr("world_size", 2))
    write_et(path, meta, nodes)
    if unknown_field:  # field 12 (varint 5) appended to the third node, as a newer schema might
        with EtReader(path) as reader:
            frames = [reader.metadata.SerializeToString()] + [n.SerializeToString() for n in reader]
        frames[3] += b"\x60\x05"
        path.write_bytes(b"".join(_frame(f) for f in frames))
    return path


def _frame(payload: bytes) -> bytes:
    from lumos.converters.chakra.varint import encode_varint

    return encode_varint(len(payload)) + payload


def _plain(path: Path, repair: bool = False) -> RankGraph:
    with EtReader(path) as reader:
        return graph_from_et(0, reader.metadata, reader, str(path), repair)


def _assert_same(got: RankGraph, want: RankGraph) -> None:
    for name in FIELDS:
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    for name in ("names", "pg_labels", "pg_ranks", "op_inputs", "op_work", "op_host_ops"):
        assert getattr(got, name) == getattr(want, name), name
    assert (got.world_size, got.dropped_deps) == (want.world_size, want.dropped_deps)


def test_columns_match_protobuf_on_every_node_pattern(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.0.et", _rank(600), unknown_field=True)
    got = read_graph(0, path.open("rb"), str(path))
    want = _plain(path)
    _assert_same(got, want)
    assert len(got) == 600 and (got.type == COLL).sum() == 50
    assert got.names[0] == "void at::native::kernel<4>" * 9 or "op_1" in got.names


def test_unsorted_ids_and_dangling_dependencies(tmp_path: Path) -> None:
    nodes = _rank(48)
    nodes.reverse()
    nodes[5].data_deps.append(999)
    path = _write(tmp_path / "r.0.et", nodes)
    with pytest.raises(TraceFormatError, match="depends on node 999"):
        read_graph(0, path.open("rb"), str(path))
    got = read_graph(0, path.open("rb"), str(path), repair=True)
    _assert_same(got, _plain(path, repair=True))
    assert got.ids.tolist() == sorted(got.ids.tolist()) and got.dropped_deps == 1


def test_names_colliding_in_the_hash_are_still_told_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(et_names, "_MUL", np.uint64(0))  # every name of a length: one hash
    path = _write(tmp_path / "r.0.et", _rank(300))
    got = read_graph(0, path.open("rb"), str(path))
    _assert_same(got, _plain(path))
    assert len(set(got.names)) == len(got.names) > 30


@pytest.mark.parametrize("parts", [2, 3, 7])
def test_a_file_read_in_byte_ranges_covers_every_node_once(tmp_path: Path, parts: int) -> None:
    path = _write(tmp_path / "r.0.et", _rank(900))
    size = path.stat().st_size
    cuts = [0] + [size * k // parts + 3 for k in range(1, parts)] + [None]  # mid-frame cuts
    head, cols = read_columns(io.BytesIO(path.read_bytes()), str(path), 0, cuts[1])
    for start, stop in itertools.pairwise(cuts[1:]):
        assert start is not None
        more_head, more = read_columns(io.BytesIO(path.read_bytes()), str(path), start, stop)
        assert more_head == b""
        cols.extend(more)
    got = graph_from_columns(0, parse_metadata(head, str(path)), cols, str(path), False)
    _assert_same(got, _plain(path))


def test_ranks_read_in_worker_processes_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for rank in range(3):
        _write(tmp_path / f"job.{rank}.et", _rank(400 + 50 * rank))
    monkeypatch.setattr(read_ranks, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(read_ranks, "PART_BYTES", 1000)
    sources = find_et_sources(tmp_path / "job")
    for jobs in (2, 8):  # 8: each rank in byte ranges too
        for source, g in read_ranks.read_sources(sources, False, jobs):
            want = _plain(Path(source.path))
            want.rank = source.rank
            _assert_same(g, want)
    assert [len(g) for g in load_graphs(tmp_path / "job")] == [400, 450, 500]
    bad = tmp_path / "job.1.et"
    bad.write_bytes(bad.read_bytes()[:-5])
    with pytest.raises(TraceFormatError, match=r"job\.1\.et \(byte \d+\): truncated message"):
        list(read_ranks.read_sources(sources, False, 2))


def test_truncated_or_corrupt_nodes_name_the_file_and_node(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.0.et", _rank(40))
    data = path.read_bytes()
    cut = tmp_path / "cut.0.et"
    cut.write_bytes(data[:-3])
    with pytest.raises(TraceFormatError, match=r"cut\.0\.et.*truncated message"):
        read_graph(0, cut.open("rb"), str(cut))
    bad = tmp_path / "bad.0.et"
    with EtReader(path) as reader:
        frames = [reader.metadata.SerializeToString()] + [n.SerializeToString() for n in reader]
    frames[4] = b"\x0a\xff\x01" + frames[4]  # a field 1 of the wrong wire type, too long
    bad.write_bytes(b"".join(_frame(f) for f in frames))
    with pytest.raises(TraceFormatError, match=r"node #3 does not parse"):
        read_graph(0, bad.open("rb"), str(bad))
    empty = tmp_path / "empty.0.et"
    empty.write_bytes(b"")
    with pytest.raises(TraceFormatError, match="empty file"):
        read_graph(0, empty.open("rb"), str(empty))


def test_gzip_and_node_less_ranks_read_like_protobuf(tmp_path: Path) -> None:
    gz = _write(tmp_path / "z.0.et.gz", _rank(120))
    assert gz.read_bytes()[:2] == b"\x1f\x8b"
    (got,) = load_graphs(gz)
    want = _plain(gz)
    resolve_groups([want])
    _assert_same(got, want)
    empty = _write(tmp_path / "e.0.et", [])
    (none,) = load_graphs(empty)
    assert len(none) == 0 and none.dep_ptr.tolist() == [0] and none.world_size == 2


class _FrameBomb(io.RawIOBase):
    """A metadata frame, then a frame header claiming `size` bytes, then zeros served on
    demand (as a gzip bomb would): `served` counts what the reader asked for."""

    def __init__(self, size: int) -> None:
        head = pb.GlobalMetadata(version="0.0.4").SerializeToString()
        self.prefix = encode_varint(len(head)) + head + encode_varint(size)
        self.left = len(self.prefix) + size
        self.served = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self.left)
        out = self.prefix[self.served : self.served + n]
        buffer[:n] = out + bytes(n - len(out))
        self.served += n
        self.left -= n
        return n


def test_frame_over_the_limit_is_refused_before_it_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fuzz finding: the simulator's reader grew a frame chunk by chunk with no bound — a
    3 MB .et.gz holding one 3 GB frame took > 4 GB and 8 CPU minutes (with the gzip ratio
    limit raised). The frame size is checked from its header, as the ET reader does."""
    bomb = _FrameBomb(3 << 30)
    with pytest.raises(ResourceLimitError, match="LUMOS_MAX_FRAME_BYTES"):
        read_columns(bomb, "bomb.0.et")
    assert bomb.served <= 2 * CHUNK_BYTES
    monkeypatch.setenv("LUMOS_MAX_FRAME_BYTES", str(1 << 20))
    with pytest.raises(ResourceLimitError, match="frame at byte"):
        read_columns(_FrameBomb((1 << 20) + 1), "bomb.0.et")


def test_frame_longer_than_a_chunk_is_read_in_a_few_reads() -> None:
    """A legitimate frame of several chunks is read by a growing buffer, not re-copied
    chunk by chunk."""
    head = pb.GlobalMetadata(version="0.0.4").SerializeToString()
    node = pb.Node(id=1, name="n" * (5 * CHUNK_BYTES), type=COMP).SerializeToString()
    raw = io.BytesIO(encode_varint(len(head)) + head + encode_varint(len(node)) + node)
    reads: list[int] = []

    class Counted(io.BufferedReader):
        def read(self, n: int | None = -1) -> bytes:
            reads.append(n or -1)
            return super().read(n)

        def readinto(self, buffer: Any) -> int:
            reads.append(len(buffer))
            return super().readinto(buffer)

    _, cols = read_columns(Counted(raw), "big.0.et")  # type: ignore[arg-type]
    assert cols.count == 1
    assert len(reads) <= 6  # the buffer doubles: no read (and copy) per chunk


def test_node_of_many_tiny_fields_costs_no_step_per_field(tmp_path: Path) -> None:
    """Fuzz finding: the lock-step walk took one numpy step per field of the longest node;
    a 1 MB node of zero bytes (field 0, 500k times) took 9 s and 460 MB, 2 MB twice that.
    Field 0 ends the walk of a node, and a node past `MAX_FIELDS` goes to protobuf."""
    import time

    head = pb.GlobalMetadata(version="0.0.4").SerializeToString()
    zeros = tmp_path / "z.0.et"
    zeros.write_bytes(_frame(head) + _frame(bytes(1 << 20)))
    began = time.process_time()
    with pytest.raises(TraceFormatError, match="does not parse"):
        read_graph(0, zeros.open("rb"), str(zeros))
    many = _rank(30)
    many[3].attr.extend(make_attr(f"a{i}", i) for i in range(20_000))  # 20k attr fields
    path = _write(tmp_path / "m.0.et", many)
    _assert_same(read_graph(0, path.open("rb"), str(path)), _plain(path))
    assert time.process_time() - began < 3  # was > 10 s
    assert MAX_FIELDS < 20_000
