"""Protobuf wire decoding of many messages at once, as numpy columns (no object per message).

A batch is a byte buffer (padded with `PAD` zero bytes, so reads past a message's end
stay in bounds) and the `(start, end)` byte spans of its messages. `walk` visits the
fields of every message in lock step — step k reads the k-th field of each message
that still has one — and returns them as parallel arrays (`Fields`); repeated fields
come back once per occurrence, in order. A message whose bytes do not parse (an unknown
wire type, a field running past its end, a varint longer than 10 bytes) is flagged in
`Fields.bad`, and the caller hands it to the real protobuf parser, which names the fault.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PAD = 16
#: fields walked per message; a message with more (a hand-made one: converted nodes have
#: a few dozen) is `bad`, so a frame of a million tiny fields costs no million steps
MAX_FIELDS = 512
_U7F = np.uint64(0x7F)


def varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varint at each position: (value as uint64, length in bytes; 0 = over 10 bytes)."""
    b = buf[pos]
    value = (b & 0x7F).astype(np.uint64)
    length = np.ones(len(pos), np.int64)
    more = np.flatnonzero(b >= 0x80)
    shift = 7
    while len(more):
        if shift >= 70:
            length[more] = 0
            break
        b = buf[pos[more] + (shift // 7)]
        value[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        last = b < 0x80
        length[more[last]] = shift // 7 + 1
        more = more[~last]
        shift += 7
    return value, length


#: tags `walk` reads: fields 1-15 of wire type varint (0) or length-delimited (2); field
#: 0 does not exist (a run of zero bytes would otherwise walk as one field per 2 bytes)
_TAG_OK = np.array([8 <= t < 0x80 and t & 7 in (0, 2) for t in range(256)], bool)


@dataclass(slots=True)
class Fields:
    """Every field of a batch of messages; a message's fields in order (interleaved with
    other messages' fields).

    `msg`: index of the message; `tag`: the field's one-byte tag (number << 3 | wire
    type); `value`: a varint's value or a length-delimited field's length; `at`: where a
    varint's value, or a length-delimited field's payload, starts. `bad[m]`: message m was not walked to its end.
    """

    msg: np.ndarray
    tag: np.ndarray
    value: np.ndarray
    at: np.ndarray
    bad: np.ndarray


def walk(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Fields:
    """Every field of every message `buf[starts[m]:ends[m]]` (see `Fields`).

    Only fields numbered 1-15 of wire types varint and length-delimited are walked; a
    message with any other field, or more than `MAX_FIELDS` fields, is `bad` (the
    caller falls back to protobuf for it).
    """
    n = len(starts)
    steps = 0
    bad = np.zeros(n, bool)
    act = np.flatnonzero(starts < ends)  # the messages with a field left, their position
    cur = starts[act].astype(np.int64)  # and end
    end = ends[act].astype(np.int64)
    parts: list[tuple[np.ndarray, ...]] = []
    while len(act):
        tag = buf[cur]
        at = cur + 1
        value, value_len = varints(buf, at)
        is_len = (tag & 7) == 2
        nxt = at + value_len
        np.add(at, value_len, out=at, where=is_len)  # a payload starts after its length
        np.add(nxt, value.view(np.int64), out=nxt, where=is_len)
        ok = _TAG_OK[tag] & (value_len > 0) & (nxt >= at) & (nxt <= end)
        if not ok.all():
            bad[act[~ok]] = True
            act, tag, value, at, nxt, end = (a[ok] for a in (act, tag, value, at, nxt, end))
        parts.append((act, tag, value, at))
        more = nxt < end
        act, cur, end = act[more], nxt[more], end[more]
        steps += 1
        if steps == MAX_FIELDS and len(act):  # one step per field: protobuf takes the rest
            bad[act] = True
            break
    if not parts:
        empty = np.zeros(0, np.int64)
        return Fields(empty, np.zeros(0, np.uint8), np.zeros(0, np.uint64), empty, bad)
    msg, tag, value, at = (np.concatenate(c) for c in zip(*parts, strict=True))
    return Fields(msg, tag, value, at, bad)


def packed_varints(
    buf: np.ndarray, at: np.ndarray, size: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The varints packed in each span `buf[at[k]:at[k]+size[k]]`: (values, span of each).

    Every non-empty span must end on a varint's last byte (< 0x80; see `packed_ok`).
    """
    total = int(size.sum())
    if not total:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    span = np.repeat(np.arange(len(at)), size)
    first = np.zeros(len(at), np.int64)
    np.cumsum(size[:-1], out=first[1:])
    pos = np.arange(total, dtype=np.int64)
    pos += (at - first)[span]
    b = buf[pos]
    ends = np.flatnonzero(b < 0x80)
    starts = np.empty(len(ends), np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    if len(ends) == total:  # every value one byte: the common case
        return b.astype(np.uint64), span
    group = np.zeros(total, np.int64)
    group[starts[1:]] = 1
    np.cumsum(group, out=group)
    k = pos - pos[starts][group]
    parts = (b & 0x7F).astype(np.uint64) << (np.minimum(k, 9).astype(np.uint64) * np.uint64(7))
    return np.bitwise_or.reduceat(parts, starts), span[starts]


def packed_ok(buf: np.ndarray, at: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Whether each packed-varint span is empty or ends on a varint's last byte."""
    return (size == 0) | (buf[at + np.maximum(size, 1) - 1] < 0x80)
