"""The `attr` fields of a chunk of Chakra nodes, decoded into the simulator's columns.

Part of `et_columns`: given where each attribute message starts, it tells the wanted
attributes apart by their name's length and first bytes (`_table`), reads their values
(varints of the integer and bool value fields; `sync_kind`'s string), and marks "slow"
the nodes that need protobuf: other wanted attributes (communication, cost-model
inputs), unusual value types, a repeated attribute, an attribute message it cannot read.
"""

from __future__ import annotations

import numpy as np

from lumos.converters.chakra import conventions as cv
from lumos.simulator.et_names import MASKS, words
from lumos.simulator.et_wire import varints
from lumos.simulator.graph import COMM_TYPES, SyncKind

_MASKS = MASKS
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
    cv.COPY_AFTER_NS,
    cv.DUR_ESTIMATED,
    cv.HOST_OPS,
    cv.FLOPS,
    cv.BYTES,
)
_SLOW_CODE = len(FAST_ATTRS) + 1
#: attribute value fields read as varints: int32, int64, uint32, uint64, bool
_INT32, _INT64, _UINT32, _UINT64, _BOOL = 7, 9, 11, 13, 27
_STRING_TAG = 29 << 3 | 2
_INT_FIELD = np.isin(np.arange(64), (_INT32, _INT64, _UINT32, _UINT64, _BOOL))
_IS_COMM = np.isin(np.arange(128), COMM_TYPES)
#: value of each attribute column where a node does not give it
_DEFAULTS = np.array([0, -1, -1, -1, 0, -1, 0, -1, -1, -1], np.int64)
#: `sync_kind` values (string_val) and their SyncKind; others mean no sync
_SYNC_WORDS = {"device": 1, "stream": 2, "event": 3, "stream_wait_event": 4}
_K2 = np.uint64(0xC2B2AE3D27D4EB4F)


_M64 = (1 << 64) - 1
#: slots of the table of wanted names, addressed by a multiplicative hash of their key
_SLOT_BITS = 8


def _name_key(n: np.ndarray, w0: np.ndarray) -> np.ndarray:
    return w0 ^ (n.astype(np.uint64) * _K2)


def _table() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.uint64, np.ndarray]:
    """The wanted names by slot (length, first and second 8 bytes, code; length -1 for an
    empty slot), the hash multiplier that gives each its own slot, and the (length, first
    byte) pairs that can be wanted."""
    names = [(a, k + 1) for k, a in enumerate(FAST_ATTRS)] + [(a, _SLOW_CODE) for a in SLOW_ATTRS]
    rows = []
    for name, code in names:
        raw = name.encode().ljust(16, b"\0")
        rows.append((len(name), *(int.from_bytes(raw[k : k + 8], "little") for k in (0, 8)), code))
    keys = [w0 ^ ((n * int(_K2)) & _M64) for n, w0, _, _ in rows]
    assert len(set(keys)) == len(keys), "wanted names must differ in their first 8 bytes"
    mul = next(
        m
        for m in range(0x9E3779B97F4A7C15, 1 << 64, 2)
        if len({((k * m) & _M64) >> (64 - _SLOT_BITS) for k in keys}) == len(keys)
    )
    size = 1 << _SLOT_BITS
    n_of, w0_of, w1_of = (
        np.full(size, -1, np.int64),
        np.zeros(size, np.uint64),
        np.zeros(size, np.uint64),
    )
    code_of = np.zeros(size, np.int8)
    maybe = np.zeros(18 * 256, bool)  # by (length, first byte)
    for key, (n, w0, w1, code) in zip(keys, rows, strict=True):
        slot = ((key * mul) & _M64) >> (64 - _SLOT_BITS)
        n_of[slot], w0_of[slot], w1_of[slot], code_of[slot] = n, w0, w1, code
        maybe[n * 256 + (w0 & 0xFF)] = True
    return n_of, w0_of, w1_of, code_of, np.uint64(mul), maybe


_SLOT_N, _SLOT_W0, _SLOT_W1, _SLOT_CODE, _MUL, _MAYBE = _table()
_SHIFT = np.uint64(64 - _SLOT_BITS)


def decode_attrs(
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
    slot = ((_name_key(ln, w0) * _MUL) >> _SHIFT).astype(np.intp)
    hit = (_SLOT_N[slot] == ln) & (_SLOT_W0[slot] == w0)
    long = np.flatnonzero(hit & (ln > 8))
    w1 = view[ns[long] + 8] & _MASKS[ln[long] - 8]
    hit[long] = w1 == _SLOT_W1[slot[long]]
    cand, slot, ns, ln = cand[hit], slot[hit], ns[hit], ln[hit]
    code = _SLOT_CODE[slot]
    msg = a_msg[cand]
    comm = _IS_COMM[np.minimum(typ[msg], 127).astype(np.int64)]
    slow[msg[(code == _SLOW_CODE) | comm]] = True
    vt = ns + ln
    end = a_at[cand] + a_len[cand]
    tag = buf[vt].astype(np.int64)
    two = tag >= 0x80  # fields 16-32: bool_val, string_val, ...
    tag_len = 1 + two
    at_two = np.flatnonzero(two)
    t1 = buf[vt[at_two] + 1].astype(np.int64)
    tag[at_two] = (tag[at_two] & 0x7F) | (t1 << 7)
    value, v_len = varints(buf, vt + tag_len)
    number = tag >> 3
    is_kind = code == _SYNC_KIND
    ok = (vt < end) & (v_len > 0)
    ok[at_two[t1 >= 0x80]] = False
    ok &= np.where(is_kind, tag == _STRING_TAG, (tag & 7) == 0)
    ok &= vt + tag_len + v_len + np.where(is_kind, value, np.uint64(0)).view(np.int64) == end
    ok &= is_kind | _INT_FIELD[np.minimum(number, 63)]
    ok &= ~((number == _UINT64) & (value >= np.uint64(1 << 63)))
    slow[msg[~ok]] = True
    kinds = np.flatnonzero(is_kind & ok)
    kind_word = _sync_words(buf, view, (vt + tag_len + v_len)[kinds], value[kinds])
    counts = np.bincount(msg * 16 + code, minlength=16 * n)
    counts[_SLOW_CODE::16] = 0  # those nodes are slow already
    if len(counts) and counts.max() > 1:  # an attribute given twice: protobuf decides
        slow |= (counts.reshape(n, 16) > 1).any(axis=1)
    v = value.view(np.int64).copy()
    odd = np.flatnonzero(number != _INT64)  # int32, uint32 and bool values, rarer
    if len(odd):
        low = value[odd] & np.uint64(0xFFFFFFFF)
        num = number[odd]
        w = np.where(num == _INT32, low.astype(np.uint32).view(np.int32).astype(np.int64), v[odd])
        w = np.where(num == _UINT32, low.view(np.int64), w)
        v[odd] = np.where(num == _BOOL, (value[odd] != 0).astype(np.int64), w)
    use = ~slow[msg]
    table = np.empty((len(_DEFAULTS), n), np.int64)
    table[:] = _DEFAULTS[:, None]
    sel = np.flatnonzero(use)
    table.ravel()[(code[sel].astype(np.int64) - 1) * n + msg[sel]] = v[sel]
    out = list(table)
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
