"""Reading a Chakra `.et` stream straight into the columns the simulator uses.

The stream is read in chunks of `CHUNK_BYTES`; a Python loop finds the frames of a chunk
(one varint each), and `et_wire.walk` decodes every node of the chunk at once. Only what
`graph_build` needs is kept: id, name, type, dependencies, `duration_micros` and the
common attributes (`is_cpu_op`, `stream`, `tid`, `dur_ns`, `gap_ns`, `start_ns`) as
arrays. A node whose attributes need more than a column — a communication node,
cost-model inputs, a runtime sync, a value of an unusual type, a repeated attribute —
or whose bytes do not parse is kept as its frame (`slow`), for `graph_build` to parse
with protobuf and read exactly as `graph_from_et` does. Memory is the columns plus one
chunk.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import IO

import numpy as np

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.varint import VarintError, decode_varint
from lumos.errors import TraceFormatError
from lumos.simulator.et_names import MASKS, NameTable, words
from lumos.simulator.et_names import MASKS as _MASKS
from lumos.simulator.et_wire import PAD, packed_ok, packed_varints, varints, walk
from lumos.simulator.graph import COMM_TYPES, SyncKind
from lumos.simulator.heap import trim

CHUNK_BYTES = 4 << 20
#: Attributes read into columns (code = position + 1); other wanted ones make a node slow.
FAST_ATTRS = (
    *("is_cpu_op", cv.STREAM, cv.TID, cv.DUR_NS, cv.GAP_NS, cv.START_NS),
    *(cv.SYNC_KIND, cv.SYNC_STREAM, cv.SYNC_EVENT, cv.EVENT_RECORD),
)
_SYNC_KIND = 7
SLOW_ATTRS = (
    "comm_type",
    "comm_size",
    "comm_src",
    "comm_dst",
    "comm_tag",
    "pg_name",
    cv.PG_RANKS,
    cv.COMM_SEQ,
    cv.COMM_DUR_NS,
    cv.DUR_ESTIMATED,
    cv.HOST_OPS,
    cv.FLOPS,
    cv.BYTES,
)
_SLOW_CODE = len(FAST_ATTRS) + 1
#: attribute value fields read as varints: int32, int64, uint32, uint64, bool
_INT32, _INT64, _UINT32, _UINT64, _BOOL = 7, 9, 11, 13, 27
_STRING_TAG = 29 << 3 | 2
#: `sync_kind` values (string_val) and their SyncKind; others mean no sync
_SYNC_WORDS = {"device": 1, "stream": 2, "event": 3, "stream_wait_event": 4}
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
_K2 = np.uint64(0xC2B2AE3D27D4EB4F)


def _name_key(n: np.ndarray, w0: np.ndarray) -> np.ndarray:
    return w0 ^ (n.astype(np.uint64) * _K2)


def _table() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    names = [(a, k + 1) for k, a in enumerate(FAST_ATTRS)] + [(a, _SLOW_CODE) for a in SLOW_ATTRS]
    rows = []
    for name, code in names:
        raw = name.encode().ljust(16, b"\0")
        w0, w1 = np.frombuffer(raw, "<u8")
        rows.append((len(name), w0, w1, code))
    n = np.array([r[0] for r in rows], np.int64)
    w0 = np.array([r[1] for r in rows], np.uint64)
    w1 = np.array([r[2] for r in rows], np.uint64)
    key = _name_key(n, w0)
    assert len(set(key.tolist())) == len(key), "wanted names must differ in their first 8 bytes"
    order = np.argsort(key)
    codes = np.array([r[3] for r in rows], np.int8)
    maybe = np.zeros(18 * 256, bool)  # by (length, first byte)
    maybe[n * 256 + (w0 & np.uint64(0xFF)).astype(np.int64)] = True
    return key[order], n[order], w0[order], w1[order], codes[order], maybe


_KEYS, _KEY_N, _KEY_W0, _KEY_W1, _KEY_CODE, _MAYBE = _table()


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
    data = b""
    base = 0  # stream offset of data[0]
    head: bytes | None = None if start == 0 else b""
    limit = stop if stop is not None else 1 << 62
    eof = False
    while not eof:
        chunk = stream.read(CHUNK_BYTES)
        eof = not chunk
        data = data + chunk if data else chunk
        offsets = frame_offsets(data, base, eof, path)
        if head is None and len(offsets) > 1:
            size, body = decode_varint(data, 0, len(data))
            head = data[body : body + size]
            offsets = offsets[1:]
        lo = bisect_left(offsets, start, 0, len(offsets) - 1)
        hi = bisect_left(offsets, limit, lo, len(offsets) - 1)
        if hi > lo:
            _decode_chunk(data, base, offsets[lo:hi], offsets[hi] - base, cols)
            trim()
        if offsets[-1] >= limit or hi < len(offsets) - 1:
            break
        used = offsets[-1] - base
        data = data[used:]
        base += used
    if head is None:
        raise TraceFormatError(path, "empty file: no GlobalMetadata message")
    return head, cols


def frame_offsets(data: bytes, base: int, eof: bool, path: str) -> list[int]:
    """Stream offsets of the whole frames in `data`, then of the end of the last one
    (the rest waits for the next chunk unless at `eof`)."""
    offsets: list[int] = []
    add = offsets.append
    n = len(data)
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


def _decode_chunk(data: bytes, base: int, offsets: list[int], used: int, cols: Columns) -> None:
    """Decode the frames at stream `offsets` (the last one ending at `data[used]`) into
    `cols`."""
    buf = np.frombuffer(data + bytes(PAD), np.uint8)
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
    sel = np.flatnonzero((kind == 4) | (kind == 5))
    dep_msg, dep_at, dep_size = msg[sel], f.at[sel], f.value[sel].view(np.int64)
    dep_ctrl = kind[sel] == 4
    slow[dep_msg[~packed_ok(buf, dep_at, dep_size)]] = True
    names, differs = cols.names.add(data, buf, name_at, name_len)
    slow |= differs  # a hash collision: protobuf reads those nodes
    sel = np.flatnonzero(kind == 10)
    attrs, has_dur, syncs = _decode_attrs(
        buf, msg[sel], f.at[sel], f.value[sel].view(np.int64), slow, typ
    )
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
        cols.slow.append((offset + m, offsets[m], data[int(starts[m]) : int(ends[m])]))
    cols.count += n


def _decode_attrs(
    buf: np.ndarray,
    a_msg: np.ndarray,
    a_at: np.ndarray,
    a_len: np.ndarray,
    slow: np.ndarray,
    typ: np.ndarray,
) -> tuple[list[np.ndarray], np.ndarray, tuple[np.ndarray, ...]]:
    """Columns (is_cpu_op, stream, tid, dur_ns, gap_ns, start_ns) from the `attr` fields
    (node, payload start, length), where `dur_ns` was given, and the runtime syncs
    (`_syncs`); marks `slow` the nodes whose wanted attributes need protobuf."""
    n = len(slow)
    b0 = buf[a_at]
    nl = buf[a_at + 1].astype(np.int64)
    named = (b0 == 0x0A) & (nl < 0x80) & (a_len >= 2 + nl)
    slow[a_msg[~named & (a_len > 0)]] = True
    # a wanted name is at most 16 bytes, and (length, first 8 bytes) tell it apart
    first = buf[a_at + 2].astype(np.int64)
    cand = np.flatnonzero(named & _MAYBE[np.minimum(nl, 17) * 256 + first])
    view = words(buf)
    ns = a_at[cand] + 2
    ln = nl[cand]
    w0 = view[ns] & _MASKS[np.minimum(ln, 8)]
    key = _name_key(ln, w0)
    pos = np.minimum(np.searchsorted(_KEYS, key), len(_KEYS) - 1)
    hit = (_KEYS[pos] == key) & (_KEY_N[pos] == ln) & (_KEY_W0[pos] == w0)
    long = np.flatnonzero(hit & (ln > 8))
    w1 = view[ns[long] + 8] & _MASKS[ln[long] - 8]
    hit[long] = w1 == _KEY_W1[pos[long]]
    cand, pos, ns, ln = cand[hit], pos[hit], ns[hit], ln[hit]
    code = _KEY_CODE[pos]
    msg = a_msg[cand]
    comm = np.isin(typ[msg], np.array(COMM_TYPES, np.uint64))
    slow[msg[(code == _SLOW_CODE) | comm]] = True
    vt = ns + ln
    end = a_at[cand] + a_len[cand]
    t0 = buf[vt].astype(np.int64)
    t1 = buf[vt + 1].astype(np.int64)
    two = t0 >= 0x80
    tag = np.where(two, (t0 & 0x7F) | (t1 << 7), t0)
    tag_len = 1 + two
    value, v_len = varints(buf, vt + tag_len)
    number = tag >> 3
    is_kind = code == _SYNC_KIND
    ok = (vt < end) & ~(two & (t1 >= 0x80)) & (v_len > 0)
    ok &= np.where(is_kind, tag == _STRING_TAG, (tag & 7) == 0)
    ok &= vt + tag_len + v_len + np.where(is_kind, value, np.uint64(0)).view(np.int64) == end
    ok &= is_kind | np.isin(number, (_INT32, _INT64, _UINT32, _UINT64, _BOOL))
    ok &= ~((number == _UINT64) & (value >= np.uint64(1 << 63)))
    slow[msg[~ok]] = True
    kinds = np.flatnonzero(is_kind & ok)
    kind_word = _sync_words(buf, view, (vt + tag_len + v_len)[kinds], value[kinds])
    repeated = np.bincount(msg * 16 + code, minlength=16 * n).reshape(n, 16) > 1
    slow |= repeated.any(axis=1)
    low = value & np.uint64(0xFFFFFFFF)
    v = value.view(np.int64)
    v = np.where(number == _INT32, low.astype(np.uint32).view(np.int32).astype(np.int64), v)
    v = np.where(number == _UINT32, low.view(np.int64), v)
    v = np.where(number == _BOOL, (value != 0).astype(np.int64), v)
    use = ~slow[msg]
    out = []
    for k, default in enumerate((0, -1, -1, -1, 0, -1, 0, -1, -1, -1)):
        col = np.full(n, default, np.int64)
        sel = use & (code == k + 1)
        col[msg[sel]] = v[sel]
        out.append(col)
    out[0] = out[0] != 0
    out[4] = np.maximum(out[4], 0)
    has_dur = np.zeros(n, bool)
    has_dur[msg[use & (code == 4)]] = True
    kind = np.zeros(n, np.int64)
    kind[msg[kinds]] = np.where(use[kinds], kind_word, 0)
    return out[:6], has_dur, _syncs(kind, out[6:10], msg[use & (code == 10)])


def _sync_words(buf: np.ndarray, view: np.ndarray, at: np.ndarray, size: np.ndarray) -> np.ndarray:
    """The SyncKind each `sync_kind` string stands for (0: none of `_SYNC_WORDS`)."""
    size = size.astype(np.int64)
    out = np.zeros(len(at), np.int64)
    for word, kind in _SYNC_WORDS.items():
        raw = word.encode()
        match = size == len(raw)
        for k in range(0, len(raw), 8):
            piece = raw[k : k + 8]
            want = np.uint64(int.from_bytes(piece, "little"))
            match[match] &= (view[at[match] + k] & MASKS[len(piece)]) == want
        out[match] = kind
    return out


def _syncs(
    kind: np.ndarray, values: list[np.ndarray], records: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(node, kind, stream, event) of each runtime sync, as `graph_build.fill_attrs` sets
    them: a known `sync_kind` waits on `sync_stream`/`sync_event`; otherwise an
    `event_record` records that event on `sync_stream`."""
    _, stream, event, record = values
    recorded = np.zeros(len(kind), bool)
    recorded[records] = True
    waits = kind > 0
    node = np.flatnonzero(waits | recorded)
    is_wait = waits[node]
    return (
        node,
        np.where(is_wait, kind[node], SyncKind.EVENT_RECORD).astype(np.int8),
        stream[node],
        np.where(is_wait, event[node], record[node]),
    )
