"""Reading a Chakra `.et` stream straight into the columns the simulator uses.

The stream is read in chunks of `CHUNK_BYTES`; a Python loop finds the frames of a chunk
(one varint each), and `et_wire.walk` decodes every node of the chunk at once. Only what
`graph_build` needs is kept: id, name, type, dependencies, `duration_micros`, the
common attributes (`is_cpu_op`, `stream`, `tid`, `dur_ns`, `gap_ns`, `start_ns`) as
arrays and the runtime syncs (`et_attrs`). A node whose attributes need more than a
column — a communication node, cost-model inputs, a value of an unusual type, a repeated
attribute — or whose bytes do not parse is kept as its frame (`slow`), for
`graph_columns` to parse with protobuf and read exactly as `graph_from_et` does. Memory
is the columns plus a few chunks (`heap.trim` every `TRIM_EVERY`).
"""

from __future__ import annotations

import os
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import IO

import numpy as np
from google.protobuf.message import DecodeError

from lumos.converters.chakra.stream import checked_count
from lumos.converters.chakra.varint import VarintError, decode_varint
from lumos.errors import TraceFormatError
from lumos.limits import MAX_FRAME_BYTES, MAX_RANK_NODES
from lumos.proto import pb
from lumos.simulator.et_attrs import decode_attrs
from lumos.simulator.et_names import NameTable
from lumos.simulator.et_wire import PAD, packed_ok, packed_varints, varints, walk
from lumos.simulator.graph_build import MAX_DURATION_US
from lumos.simulator.heap import trim

CHUNK_BYTES = 4 << 20
#: chunks between two returns of free heap memory to the system (`heap.trim`: each costs
#: page faults later, so not after every chunk)
TRIM_EVERY = 16
#: (field, wire type) of Node: id, name, type, ctrl_deps, data_deps, start_time_micros,
#: duration_micros, inputs, outputs, attr
_NODE_FIELDS = {(1, 0), (2, 2), (3, 0), (4, 2), (5, 2), (6, 0), (7, 0), (8, 2), (9, 2), (10, 2)}
#: by one-byte tag: the Node field (1-10), 0 for an unknown field, -1 for a wrong wire type
_KIND = np.array(
    [
        (t >> 3 if (t >> 3, t & 7) in _NODE_FIELDS else -1)
        if 1 <= t >> 3 <= 10
        else (0 if t >> 3 else -1)
        for t in range(256)
    ],
    np.int8,
)
#: slot of the singular fields id, name, type, duration_micros by `_KIND` (-1, the last
#: entry, for the others)
_SINGULAR = np.array([-1, 0, 1, 2, -1, -1, -1, 3, -1, -1, -1, -1], np.int8)


@dataclass(slots=True)
class Columns:
    """One rank's nodes in file order, as lists of per-chunk arrays until `finish`."""

    ids: list[np.ndarray] = field(default_factory=list)
    name_idx: list[np.ndarray] = field(default_factory=list)
    type: list[np.ndarray] = field(default_factory=list)
    dur_us: list[np.ndarray] = field(default_factory=list)
    dep_owner: list[np.ndarray] = field(default_factory=list)
    dep_id: list[np.ndarray] = field(default_factory=list)
    is_cpu_op: list[np.ndarray] = field(default_factory=list)
    stream: list[np.ndarray] = field(default_factory=list)
    tid: list[np.ndarray] = field(default_factory=list)
    dur_ns: list[np.ndarray] = field(default_factory=list)
    gap_ns: list[np.ndarray] = field(default_factory=list)
    start_ns: list[np.ndarray] = field(default_factory=list)
    names: NameTable = field(default_factory=NameTable)
    #: (file index, byte offset, frame) of each node read by protobuf instead
    slow: list[tuple[int, int, bytes]] = field(default_factory=list)
    #: runtime syncs of fast nodes: (node, SyncKind, stream, event) arrays per chunk
    sync: list[tuple[np.ndarray, ...]] = field(default_factory=list)
    count: int = 0

    def extend(self, other: Columns) -> None:
        """Append the nodes of `other` (the next part of the same file; consumed)."""
        remap = np.asarray([self.names.intern(raw) for raw in other.names.raw], np.int32)
        for name in _ARRAYS:
            mine, theirs = getattr(self, name), getattr(other, name)
            if name == "name_idx":
                theirs = [remap[part] for part in theirs] if len(remap) else theirs
            elif name == "dep_owner":
                theirs = [part + self.count for part in theirs]
            mine.extend(theirs)
            theirs.clear()
        self.slow.extend((i + self.count, at, frame) for i, at, frame in other.slow)
        self.sync.extend((node + self.count, *rest) for node, *rest in other.sync)
        self.count += other.count


_ARRAYS = (
    "ids",
    "name_idx",
    "type",
    "dur_us",
    "dep_owner",
    "dep_id",
    "is_cpu_op",
    "stream",
    "tid",
    "dur_ns",
    "gap_ns",
    "start_ns",
)


def read_columns(
    stream: IO[bytes], path: str, start: int = 0, stop: int | None = None
) -> tuple[bytes, Columns]:
    """(GlobalMetadata frame, node columns) of one `.et` stream.

    With `start`/`stop` (stream offsets), only the frames starting in [start, stop) are
    decoded — frames are still followed from the start of the stream, so several parts
    of one file split anywhere cover it exactly once; the metadata is returned by the
    part with `start` 0 only (b"" for the others).
    Raises TraceFormatError naming `path` for an empty stream or a truncated frame.
    """
    cols = Columns()
    decoded = 0
    # one buffer for the whole stream: the bytes not yet decoded, the next chunk read in
    # after them, then PAD zero bytes (`_decode_chunk` reads past a frame's end)
    data = bytearray(min(CHUNK_BYTES, _size_hint(stream)) + 1 + PAD)
    held = 0  # bytes of data in use
    base = 0  # stream offset of data[0]
    head: bytes | None = None if start == 0 else b""
    limit = stop if stop is not None else 1 << 62
    eof = False
    while not eof:
        room = len(data) - PAD - held
        # a full buffer (a frame longer than what it holds), or a frame over half a chunk
        if room < CHUNK_BYTES // 2 and (room == 0 or len(data) > CHUNK_BYTES // 2):
            data = _grown(data, held, held + CHUNK_BYTES + PAD)
            room = len(data) - PAD - held
        got = _read_into(stream, data, held, room)
        eof = not got
        held += got
        data[held : held + PAD] = bytes(PAD)
        offsets = frame_offsets(data, base, eof, path, held)
        if head is None and len(offsets) > 1:
            size, body = decode_varint(data, 0, held)
            head = bytes(data[body : body + size])
            offsets = offsets[1:]
            _check_stated_count(head, path)
        lo = bisect_left(offsets, start, 0, len(offsets) - 1)
        hi = bisect_left(offsets, limit, lo, len(offsets) - 1)
        if hi > lo:
            _decode_chunk(data, held, base, offsets[lo:hi], offsets[hi] - base, cols)
            MAX_RANK_NODES.check(cols.count, f"{path}: nodes of one rank's ET")
            decoded += 1
            if decoded % TRIM_EVERY == 0:
                trim()
        if offsets[-1] >= limit or hi < len(offsets) - 1:
            break
        used = offsets[-1] - base
        data[: held - used] = data[used:held]
        held -= used
        base += used
    if head is None:
        raise TraceFormatError(path, "empty file: no GlobalMetadata message")
    return head, cols


def _check_stated_count(head: bytes, path: str) -> None:
    """Refuse a rank whose metadata states a negative `node_count`, or more nodes than
    `MAX_RANK_NODES`, at its first chunk: an oversized file was read up to the limit (1.2 GB
    at 8.4 million nodes) before. A header that does not parse is `graph_columns`' to name."""
    meta = pb.GlobalMetadata()
    try:
        meta.ParseFromString(head)
    except DecodeError:
        return
    check_stated(checked_count(meta, path), path)


def check_stated(count: int | None, path: str) -> None:
    """Raises ResourceLimitError if a rank's metadata states more nodes than
    `MAX_RANK_NODES` (None: the file states no count)."""
    if count is not None:
        MAX_RANK_NODES.check(count, f"{path}: nodes of one rank's ET (its metadata's node_count)")


def _size_hint(stream: IO[bytes]) -> int:
    """Bytes left in a plain file (its buffer then fits a small rank); else a chunk's."""
    try:
        left = os.fstat(stream.fileno()).st_size - stream.tell()
    except (OSError, AttributeError, ValueError):  # io.UnsupportedOperation is both
        return CHUNK_BYTES
    return left if left > 0 else CHUNK_BYTES


def _grown(data: bytearray, held: int, size: int) -> bytearray:
    out = bytearray(max(size, 2 * len(data)))
    out[:held] = data[:held]
    return out


def _read_into(stream: IO[bytes], data: bytearray, at: int, size: int) -> int:
    """Read up to `size` bytes of `stream` into `data[at:]`; 0 at the end of the stream."""
    readinto = getattr(stream, "readinto", None)
    if readinto is not None:
        with memoryview(data) as view:
            return int(readinto(view[at : at + size]) or 0)
    chunk = stream.read(size)
    data[at : at + len(chunk)] = chunk
    return len(chunk)


def frame_offsets(
    data: bytes | bytearray, base: int, eof: bool, path: str, held: int | None = None
) -> list[int]:
    """Stream offsets of the whole frames in `data[:held]` (all of it by default), then
    of the end of the last one (the rest waits for the next chunk unless at `eof`).

    Raises TraceFormatError for a truncated frame, ResourceLimitError for a frame longer
    than `limits.MAX_FRAME_BYTES` (from its header, before its bytes are read).
    """
    max_frame = MAX_FRAME_BYTES.value
    offsets: list[int] = []
    add = offsets.append
    n = len(data) if held is None else held
    p = 0
    while p < n:
        b = data[p]
        if b < 0x80:
            end = p + 1 + b
        elif p + 1 < n and data[p + 1] < 0x80:
            end = p + 2 + ((b & 0x7F) | (data[p + 1] << 7))
        else:
            try:
                size, body = decode_varint(data, p, n)
            except VarintError as exc:
                if not eof:
                    break
                raise TraceFormatError(path, str(exc), where=f"byte {base + exc.offset}") from None
            end = body + size
        if end - p > max_frame:  # header and payload: cheap, and exact for small limits
            _frame_too_long(data, p, base, path)
        if end > n:
            if eof:
                size, body = decode_varint(data, p, n)
                raise TraceFormatError(
                    path,
                    f"truncated message: frame says {size} bytes, {n - body} remain",
                    where=f"byte {base + p}",
                )
            break
        add(base + p)
        p = end
    add(base + p)
    return offsets


def _frame_too_long(data: bytes | bytearray, p: int, base: int, path: str) -> None:
    size, _ = decode_varint(data, p, len(data))
    MAX_FRAME_BYTES.check(size, f"{path}: frame at byte {base + p}: size in bytes")


def _decode_chunk(
    data: bytearray, held: int, base: int, offsets: list[int], used: int, cols: Columns
) -> None:
    """Decode the frames at stream `offsets` (the last one ending at `data[used]`) into
    `cols`; `data[held:held + PAD]` are zero bytes."""
    buf = np.frombuffer(data, np.uint8, held + PAD)
    frame = np.asarray(offsets, np.int64) - base
    _, head = varints(buf, frame)
    starts = frame + head
    ends = np.empty_like(starts)
    ends[:-1] = frame[1:]
    ends[-1] = used
    n = len(starts)
    f = walk(buf, starts, ends)
    slow = f.bad
    kind = _KIND[f.tag]
    msg = f.msg
    # a Node field of the wrong wire type, or a singular one repeated: protobuf decides
    slow[msg[kind < 0]] = True
    singular = np.flatnonzero(_SINGULAR[kind] >= 0)
    slot = msg[singular] * 4 + _SINGULAR[kind[singular]]
    slow |= (np.bincount(slot, minlength=4 * n).reshape(n, 4) > 1).any(axis=1)
    ids = np.zeros(n, np.uint64)
    typ = np.zeros(n, np.uint64)
    dur = np.zeros(n, np.uint64)
    name_at = np.zeros(n, np.int64)
    name_len = np.zeros(n, np.int64)
    for number, out in ((1, ids), (3, typ), (7, dur)):
        sel = np.flatnonzero(kind == number)
        out[msg[sel]] = f.value[sel]
    sel = np.flatnonzero(kind == 2)
    name_at[msg[sel]] = f.at[sel]
    name_len[msg[sel]] = f.value[sel].view(np.int64)
    slow |= typ > 127
    slow |= dur > np.uint64(MAX_DURATION_US)  # protobuf's reader names it (graph_columns)
    sel = np.flatnonzero((kind == 4) | (kind == 5))
    dep_msg, dep_at, dep_size = msg[sel], f.at[sel], f.value[sel].view(np.int64)
    dep_ctrl = kind[sel] == 4
    slow[dep_msg[~packed_ok(buf, dep_at, dep_size)]] = True
    names, differs = cols.names.add(data, buf, name_at, name_len)
    slow |= differs  # a hash collision: protobuf reads those nodes
    sel = np.flatnonzero(kind == 10)
    attrs, has_dur, syncs = decode_attrs(
        buf, msg[sel], f.at[sel], f.value[sel].view(np.int64), slow, typ
    )
    slow |= has_dur & (attrs[3] < 0)  # -1 given is not "none given": protobuf names it
    # columns of the fast nodes; slow ones keep defaults until protobuf reads them
    cols.name_idx.append(names)
    fast = ~slow
    offset = cols.count
    dur_us = (np.where(fast, dur, 0) * np.uint64(1000)).view(np.int64)
    cols.ids.append(np.where(fast, ids, 0).view(np.int64))
    cols.type.append(np.where(fast, typ, 0).astype(np.int8))
    cols.dur_us.append(dur_us)
    sel = fast[dep_msg]
    values, span = packed_varints(buf, dep_at[sel], dep_size[sel])
    owner = dep_msg[sel][span]
    # data deps before control deps, each in file order
    order = np.lexsort((dep_ctrl[sel][span], owner))
    cols.dep_owner.append(owner[order] + offset)
    cols.dep_id.append(values[order].view(np.int64))
    attrs[3] = np.where(has_dur, attrs[3], np.where(dur_us != 0, dur_us, -1))
    for name, column in zip(
        ("is_cpu_op", "stream", "tid", "dur_ns", "gap_ns", "start_ns"), attrs, strict=True
    ):
        getattr(cols, name).append(column)
    node, kind, stream, event = syncs
    keep = fast[node]
    cols.sync.append((node[keep] + offset, kind[keep], stream[keep], event[keep]))
    for m in np.flatnonzero(slow).tolist():
        cols.slow.append((offset + m, offsets[m], bytes(data[int(starts[m]) : int(ends[m])])))
    cols.count += n
