"""Streaming reader and atomic writer for Chakra `.et` files.

A `.et` file is a stream of varint-length-prefixed protobuf messages: one
`GlobalMetadata`, then `Node`s, with no count and no footer; gzip-compressed streams are
accepted transparently. The reader holds one buffer chunk at a time, so a multi-GB file
never sits in memory; the writer writes to a temporary file and renames it only when every
node was written, so a failure never leaves a half-written trace behind. Files lumos
writes state their node count in the metadata (`node_count`); a file that ends early —
cut at a frame boundary, which the framing alone cannot tell — is then an error, and a
frame larger than `limits.MAX_FRAME_BYTES` is refused before it is read.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, cast

from google.protobuf.message import DecodeError

from lumos.converters.chakra.compressed import open_file
from lumos.converters.chakra.varint import VarintError, decode_varint, encode_varint
from lumos.errors import OutputError, TraceFormatError
from lumos.limits import MAX_FRAME_BYTES
from lumos.outputs import AtomicFile, describe
from lumos.proto import pb

CHUNK_BYTES = 1 << 20
#: Chakra schema version ASTRA-sim's readers expect in GlobalMetadata.
ET_SCHEMA_VERSION = "0.0.4"
#: GlobalMetadata attribute: how many Node messages follow (see conventions.META_NODE_COUNT).
NODE_COUNT = "node_count"


def iter_frames(stream: IO[bytes], name: str) -> Iterator[tuple[int, bytes]]:
    """Yield (byte offset, payload) of each length-prefixed frame in `stream`.

    Raises TraceFormatError naming `name` and the offset if a frame is truncated, and
    ResourceLimitError if a frame claims more than `limits.MAX_FRAME_BYTES`.
    """
    max_frame = MAX_FRAME_BYTES.value
    buf = b""
    pos = 0
    base = 0  # stream offset of buf[0]
    eof = False
    while True:
        if len(buf) - pos < MAX_HEADER and not eof:
            chunk = stream.read(CHUNK_BYTES)
            if not chunk:
                eof = True
            buf = buf[pos:] + chunk
            base += pos
            pos = 0
        if pos >= len(buf):
            return
        try:
            size, body = decode_varint(buf, pos, len(buf))
        except VarintError as exc:
            if not eof:
                # Header may straddle the chunk boundary; force a refill and retry.
                more = stream.read(CHUNK_BYTES)
                if more:
                    buf = buf[pos:] + more
                    base += pos
                    pos = 0
                    continue
                eof = True
                continue
            raise TraceFormatError(name, str(exc), where=f"byte {base + exc.offset}") from None
        if size > max_frame:
            MAX_FRAME_BYTES.check(size, f"{name}: frame at byte {base + pos}: size in bytes")
        end = body + size
        while end > len(buf) and not eof:
            chunk = stream.read(max(CHUNK_BYTES, end - len(buf)))
            if not chunk:
                eof = True
                break
            buf = buf[pos:] + chunk
            base += pos
            body -= pos
            end -= pos
            pos = 0
        if end > len(buf):
            raise TraceFormatError(
                name,
                f"truncated message: frame says {size} bytes, {len(buf) - body} remain",
                where=f"byte {base + pos}",
            )
        yield base + pos, buf[body:end]
        pos = end


MAX_HEADER = 10


class EtReader:
    """Reads one `.et` stream: `metadata` first, then iterate for the nodes.

    Use as a context manager, or call `close()`. Iterating parses each node lazily.
    """

    def __init__(self, path: str | os.PathLike[str], *, stream: IO[bytes] | None = None) -> None:
        self.path = str(path)
        self._stream: IO[bytes] = stream if stream is not None else open_file(str(path))
        self._frames = iter_frames(self._stream, self.path)
        try:
            first = next(self._frames, None)
        except TraceFormatError:
            self.close()
            raise
        if first is None:
            self.close()
            raise TraceFormatError(self.path, "empty file: no GlobalMetadata message")
        self.metadata = pb.GlobalMetadata()
        try:
            self.metadata.ParseFromString(first[1])
        except DecodeError as exc:
            self.close()
            raise TraceFormatError(
                self.path, f"bad GlobalMetadata: {exc}", where="byte 0"
            ) from None
        try:
            self.node_count = checked_count(self.metadata, self.path)
        except TraceFormatError:
            self.close()
            raise

    def __enter__(self) -> EtReader:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._stream.close()

    def __iter__(self) -> Iterator[pb.Node]:
        """The nodes in file order. Raises TraceFormatError if a node does not parse, or
        if the file holds fewer or more nodes than its metadata's `node_count`."""
        index = 0
        for index, (offset, payload) in enumerate(self._frames, 1):
            node = pb.Node()
            try:
                node.ParseFromString(payload)
            except (DecodeError, RecursionError) as exc:
                raise TraceFormatError(
                    self.path, f"node #{index - 1} does not parse: {exc}", where=f"byte {offset}"
                ) from None
            yield node
        if self.node_count is not None and index != self.node_count:
            raise TraceFormatError(
                self.path,
                f"holds {index:,} nodes but its metadata says {self.node_count:,}: "
                + ("the file was cut short" if index < self.node_count else "nodes were appended"),
            )


def declared_count(meta: pb.GlobalMetadata) -> int | None:
    """The metadata's `node_count`, if the producer wrote one."""
    for attr in meta.attr:
        if attr.name == NODE_COUNT and attr.WhichOneof("value") in ("int64_val", "uint64_val"):
            return int(getattr(attr, attr.WhichOneof("value") or "int64_val"))
    return None


def checked_count(meta: pb.GlobalMetadata, path: str) -> int | None:
    """`declared_count`, refusing a negative one: no file holds -5 nodes, and comparing it
    with the nodes read would blame the file's end ("nodes were appended").

    Raises TraceFormatError naming `path` and the field.
    """
    count = declared_count(meta)
    if count is not None and count < 0:
        raise TraceFormatError(
            path,
            f"metadata {NODE_COUNT} is {count:,}: not a node count (0 or more); the "
            "producer wrote a bad header",
        )
    return count


def with_node_count(meta: pb.GlobalMetadata, count: int) -> pb.GlobalMetadata:
    """A copy of `meta` whose `node_count` is `count` (replacing any earlier one)."""
    out = pb.GlobalMetadata()
    out.CopyFrom(meta)
    kept = [a for a in out.attr if a.name != NODE_COUNT]
    del out.attr[:]
    out.attr.extend(kept)
    out.attr.add(name=NODE_COUNT, int64_val=count)
    return out


def read_et(path: str | os.PathLike[str]) -> tuple[pb.GlobalMetadata, list[pb.Node]]:
    """Read a whole `.et` file into memory (for small files; stream big ones with EtReader)."""
    with EtReader(path) as reader:
        return reader.metadata, list(reader)


class EtWriter:
    """Writes one `.et` stream atomically: to a temp file, renamed on a clean close.

    The output is gzip-compressed when the path ends in `.gz`. Refuses an all-default
    node, since readers take its zero-length frame for the end of the file. If the
    metadata declares a `node_count`, closing with another count is an error (the file
    is then not written). Raises OutputError if the file cannot be written.
    """

    def __init__(
        self, path: str | os.PathLike[str], metadata: pb.GlobalMetadata | None = None
    ) -> None:
        self.path = Path(path)
        self._file = AtomicFile(self.path, buffering=CHUNK_BYTES)
        raw = self._file.file
        self._out: IO[bytes] = (
            cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="wb", mtime=0))
            if self.path.suffix == ".gz"
            else raw
        )
        self._raw = raw
        self.count = 0
        meta = metadata or pb.GlobalMetadata(version=ET_SCHEMA_VERSION)
        self.declared = declared_count(meta)
        self._write_frame(meta.SerializeToString(deterministic=True))

    def _write_frame(self, payload: bytes) -> None:
        try:
            self._out.write(encode_varint(len(payload)))
            self._out.write(payload)
        except OSError as exc:
            self.abort()
            raise OutputError(f"{self.path}: cannot write: {describe(exc)}") from None

    def write(self, node: pb.Node) -> None:
        """Append one node. Raises TraceFormatError if it serializes to nothing."""
        payload = node.SerializeToString(deterministic=True)
        if not payload:
            raise TraceFormatError(
                str(self.path),
                "refusing to write an all-default node (id 0, no name, no type): "
                "readers take its empty frame for the end of the file",
                where=f"node #{self.count}",
            )
        self._write_frame(payload)
        self.count += 1

    def write_all(self, nodes: Iterable[pb.Node]) -> None:
        for node in nodes:
            self.write(node)

    def close(self) -> None:
        """Finish the file and move it into place.

        Raises TraceFormatError if the metadata's `node_count` is not the count written.
        """
        if self.declared is not None and self.declared != self.count:
            self.abort()
            raise TraceFormatError(
                str(self.path),
                f"metadata declares node_count {self.declared:,} but {self.count:,} nodes "
                "were written; nothing written",
            )
        try:
            self._out.close()
        except OSError as exc:
            self.abort()
            raise OutputError(f"{self.path}: cannot write: {describe(exc)}") from None
        self._file.commit()

    def abort(self) -> None:
        """Drop the partial output."""
        try:
            self._out.close()
        except OSError:
            pass
        finally:
            self._file.abort()

    def __enter__(self) -> EtWriter:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if et is None:
            self.close()
        else:
            self.abort()


def write_et(
    path: str | os.PathLike[str], metadata: pb.GlobalMetadata | None, nodes: Iterable[pb.Node]
) -> int:
    """Write a whole `.et` file atomically; return the node count."""
    with EtWriter(path, metadata) as writer:
        writer.write_all(nodes)
        return writer.count
