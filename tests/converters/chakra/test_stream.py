"""The .et stream layer on every real Chakra ET in the shared fixtures, and on bad files."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.stream import EtReader, EtWriter, read_et, write_et
from lumos.converters.chakra.varint import encode_varint
from lumos.errors import TraceFormatError
from lumos.proto import pb
from tests.conftest import FIXTURES, fixture_path


def all_fixture_ets() -> list[Path]:
    return sorted(FIXTURES.glob("**/*.et")) if FIXTURES.exists() else []


def rewrite(path: Path, out: Path) -> bytes:
    meta, nodes = read_et(path)
    write_et(out, meta, nodes)
    return out.read_bytes()


def test_every_fixture_et_rewrites_byte_identically(fixtures: Path, tmp_path: Path) -> None:
    files = all_fixture_ets()
    assert len(files) >= 130, "expected the ASTRA-sim microbenchmarks, custom ring and T2D"
    for path in files:
        assert rewrite(path, tmp_path / "x.0.et") == path.read_bytes(), path


def test_chakra_feeder_et_rewrites_byte_identically(chakra_et: Path, tmp_path: Path) -> None:
    _, nodes = read_et(chakra_et)
    assert len(nodes) == 3664
    assert rewrite(chakra_et, tmp_path / "c.0.et") == chakra_et.read_bytes()


def test_resnet_tar_members_rewrite_byte_identically(tmp_path: Path) -> None:
    tar_path = fixture_path("astra-sim/inputs/workload/ASTRA-sim-2.0/resnet_dp.tar")
    sources = find_et_sources(tar_path)
    assert [s.rank for s in sources] == list(range(64))
    with tarfile.open(tar_path) as tar:
        for source in sources[::9]:
            original = tar.extractfile(source.member or "").read()  # type: ignore[union-attr]
            with source.open() as reader:
                meta, nodes = reader.metadata, list(reader)
            assert len(nodes) == 215
            write_et(tmp_path / "r.0.et", meta, nodes)
            assert (tmp_path / "r.0.et").read_bytes() == original


def test_gzip_streams_read_transparently(chakra_et: Path, tmp_path: Path) -> None:
    gz = tmp_path / "c.0.et.gz"
    gz.write_bytes(gzip.compress(chakra_et.read_bytes()))
    meta, nodes = read_et(gz)
    assert len(nodes) == 3664 and nodes[-1].id == read_et(chakra_et)[1][-1].id
    write_et(tmp_path / "w.0.et.gz", meta, nodes)
    assert gzip.decompress((tmp_path / "w.0.et.gz").read_bytes()) == chakra_et.read_bytes()


def test_frames_straddling_chunk_boundaries(
    monkeypatch: pytest.MonkeyPatch, chakra_et: Path
) -> None:
    import lumos.converters.chakra.stream as et_io

    monkeypatch.setattr(et_io, "CHUNK_BYTES", 7)  # every header and body crosses a chunk edge
    _, nodes = read_et(chakra_et)
    assert len(nodes) == 3664


def _good_bytes() -> bytes:
    buf = io.BytesIO()
    meta = pb.GlobalMetadata(version="0.0.4").SerializeToString()
    buf.write(encode_varint(len(meta)) + meta)
    for i in range(3):
        n = pb.Node(
            id=i + 1, name=f"n{i}", type=pb.COMP_NODE, duration_micros=5
        ).SerializeToString()
        buf.write(encode_varint(len(n)) + n)
    return buf.getvalue()


def test_truncated_varint_is_reported_with_offset(tmp_path: Path) -> None:
    bad = tmp_path / "t.0.et"
    bad.write_bytes(_good_bytes() + b"\xff\xff")
    with pytest.raises(TraceFormatError, match=r"t\.0\.et \(byte \d+\): truncated varint"):
        read_et(bad)


def test_truncated_message_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "t.0.et"
    bad.write_bytes(_good_bytes()[:-3])
    with pytest.raises(TraceFormatError, match="truncated message: frame says"):
        read_et(bad)


def test_garbage_bytes_name_the_node(tmp_path: Path) -> None:
    bad = tmp_path / "g.0.et"
    bad.write_bytes(_good_bytes() + b"\x05\xff\xff\xff\xff\xff")
    with pytest.raises(TraceFormatError, match=r"node #3 does not parse"):
        read_et(bad)


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "e.0.et").write_bytes(b"")
    with pytest.raises(TraceFormatError, match="empty file"):
        read_et(tmp_path / "e.0.et")


def test_writer_refuses_all_default_node_and_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "w.0.et"
    with pytest.raises(TraceFormatError, match="all-default node"):
        write_et(out, None, [pb.Node(id=1, name="a"), pb.Node()])
    assert list(tmp_path.iterdir()) == []  # no half-written output, no temp file


def test_reader_streams_without_loading_everything(chakra_et: Path) -> None:
    with EtReader(chakra_et) as reader:
        first = next(iter(reader))
        assert first.name
    with EtWriter(chakra_et.parent / "s.0.et") as w:
        w.write(first)
    assert read_et(chakra_et.parent / "s.0.et")[1][0] == first


def test_find_sources_by_folder_prefix_and_file() -> None:
    folder = fixture_path("astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB")
    by_dir = find_et_sources(folder)
    assert [s.rank for s in by_dir] == list(range(8))
    assert [s.path for s in find_et_sources(folder / "all_reduce")] == [s.path for s in by_dir]
    assert len(find_et_sources(folder / "all_reduce.3.et")) == 1
    with pytest.raises(TraceFormatError, match="no Chakra ET files"):
        find_et_sources(folder / "nothing")


def test_truncated_gzip_et_names_the_file(chakra_et: Path, tmp_path: Path) -> None:
    """A cut .et.gz gives one clear error (it used to reach click as a bare EOFError)."""
    cut = tmp_path / "c.0.et.gz"
    cut.write_bytes(gzip.compress(chakra_et.read_bytes())[:20_000])
    with pytest.raises(TraceFormatError, match=r"c\.0\.et\.gz: truncated or corrupt gzip data"):
        read_et(cut)
