"""Protobuf wire format for many messages at once, as numpy byte columns.

A message is the row-wise concatenation of its fields' bytes, one row per message.
Short fields (tags, varints, small strings) are `Mat`s: a (rows, width) byte matrix whose
row i holds its bytes left-aligned in its first `lens[i]` columns; neighbouring `Mat`s are
joined by stacking them side by side and keeping the valid bytes with one boolean mask.
Long fields (tensor shapes, big names) are `Ragged`: all rows' bytes back to back, copied
into place with one index scatter. Rows where a field is absent have length 0, which is
how proto3 omits it. Only numpy work per field, no Python per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lumos.converters.chakra.varint import encode_varint

_POW7 = np.array([1 << (7 * k) for k in range(1, 10)], np.uint64)
#: a ragged field wider than this many bytes per row stays ragged (not a matrix).
MAX_MAT_WIDTH = 256


@dataclass(slots=True)
class Ragged:
    """Per-row byte strings: `data` concatenated in row order, `lens[i]` bytes for row i."""

    data: np.ndarray  # uint8
    lens: np.ndarray  # int64


@dataclass(slots=True)
class Mat:
    """Per-row byte strings, left-aligned in the rows of a byte matrix."""

    mat: np.ndarray  # uint8 (rows, width)
    lens: np.ndarray  # int64

    def mask(self) -> np.ndarray:
        return np.arange(self.mat.shape[1])[None, :] < self.lens[:, None]


Field = Ragged | Mat


def _excl_cumsum(lens: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lens), np.int64)
    np.cumsum(lens[:-1], out=out[1:])
    return out


def varints(values: np.ndarray, present: np.ndarray | None = None) -> Mat:
    """The varint of each row's value (negatives take 10 bytes, as int64 fields do)."""
    v = values.astype(np.int64).view(np.uint64)
    n = 1 + np.searchsorted(_POW7, v, side="right").astype(np.int64)
    if present is not None:
        n = np.where(present, n, 0)
    width = int(n.max()) if len(n) else 0
    if width <= 1:
        return Mat(v.astype(np.uint8)[:, None], n)
    shifts = np.arange(0, 7 * width, 7, dtype=np.uint64)
    groups = (v[:, None] >> shifts[None, :]) & np.uint64(0x7F)
    more = np.arange(1, width + 1)[None, :] < n[:, None]
    return Mat((groups | (more.astype(np.uint64) << np.uint64(7))).astype(np.uint8), n)


def const(prefix: bytes, present: np.ndarray) -> Mat:
    """The same bytes on every present row."""
    row = np.frombuffer(prefix, np.uint8)
    mat = np.broadcast_to(row, (len(present), len(row)))
    return Mat(mat, np.where(present, len(row), 0).astype(np.int64))


def column(values: np.ndarray, present: np.ndarray) -> Mat:
    """One byte (values < 256) on every present row."""
    return Mat(values.astype(np.uint8)[:, None], present.astype(np.int64))


def lookup(table: list[bytes], ids: np.ndarray, present: np.ndarray) -> list[Field]:
    """Row i gets table[ids[i]] where present: short entries as a matrix, long ones ragged."""
    sizes = np.fromiter((len(t) for t in table), np.int64, len(table))
    short = sizes <= MAX_MAT_WIDTH
    width = int(sizes[short].max()) if short.any() else 0
    padded = np.zeros((len(table), width), np.uint8)
    for i in np.flatnonzero(short).tolist():
        padded[i, : sizes[i]] = np.frombuffer(table[i], np.uint8)
    safe = np.where(present, ids, 0)
    is_short = present & short[safe]
    mat = Mat(padded[safe], np.where(is_short, sizes[safe], 0))
    is_long = present & ~short[safe]
    if not is_long.any():
        return [mat]
    items = [table[i] for i in safe[is_long].tolist()]
    return [mat, payloads(items, is_long)]


def payloads(items: list[bytes], present: np.ndarray) -> Ragged:
    """Row i (in order among the present rows) gets the next item."""
    lens = np.zeros(len(present), np.int64)
    lens[present] = np.fromiter((len(t) for t in items), np.int64, len(items))
    return Ragged(np.frombuffer(b"".join(items), np.uint8), lens)


def payload_fields(items: list[bytes], present: np.ndarray, width: int = 1024) -> list[Field]:
    """Row i (in order among the present rows) gets the next item: items of up to `width`
    bytes as a matrix (padded in C by `ljust`), longer ones ragged."""
    sizes = np.fromiter((len(t) for t in items), np.int64, len(items))
    lens = np.zeros(len(present), np.int64)
    lens[present] = sizes
    long_rows = sizes > width
    if long_rows.any():
        short_items = [t for t, big in zip(items, long_rows.tolist(), strict=True) if not big]
        long_items = [t for t, big in zip(items, long_rows.tolist(), strict=True) if big]
        is_long = np.zeros(len(present), bool)
        is_long[np.flatnonzero(present)[long_rows]] = True
        return [
            *payload_fields(short_items, present & ~is_long, width),
            payloads(long_items, is_long),
        ]
    w = int(sizes.max()) if len(sizes) else 0
    mat = np.zeros((len(present), w), np.uint8)
    if len(items) and w:
        mat[present] = np.frombuffer(
            b"".join([t.ljust(w, b"\0") for t in items]), np.uint8
        ).reshape(len(items), w)
    return [Mat(mat, lens)]


def ragged_to_mat(field: Ragged) -> Mat:
    width = int(field.lens.max()) if len(field.lens) else 0
    mat = np.zeros((len(field.lens), width), np.uint8)
    mat[np.arange(width)[None, :] < field.lens[:, None]] = field.data
    return Mat(mat, field.lens)


def _join_mats(mats: list[Mat]) -> Ragged:
    rows = len(mats[0].lens)
    width = sum(m.mat.shape[1] for m in mats)
    big = np.empty((rows, width), np.uint8)
    mask = np.empty((rows, width), bool)
    ruler = np.arange(max((m.mat.shape[1] for m in mats), default=0))
    lens = np.zeros(rows, np.int64)
    at = 0
    for m in mats:
        w = m.mat.shape[1]
        big[:, at : at + w] = m.mat
        np.less(ruler[None, :w], m.lens[:, None], out=mask[:, at : at + w])
        lens += m.lens
        at += w
    return Ragged(big[mask], lens)


def lengths(fields: list[Field]) -> np.ndarray:
    return np.sum([f.lens for f in fields], axis=0)


def concat(fields: list[Field]) -> Ragged:
    """Row-wise concatenation: row i is fields[0] row i, then fields[1] row i, ..."""
    runs: list[Ragged] = []
    pending: list[Mat] = []
    for field in fields:
        if isinstance(field, Ragged) and len(field.lens) and int(field.lens.max()) <= MAX_MAT_WIDTH:
            field = ragged_to_mat(field)
        if isinstance(field, Mat):
            pending.append(field)
            continue
        if pending:
            runs.append(_join_mats(pending))
            pending = []
        runs.append(field)
    if pending:
        runs.append(_join_mats(pending))
    if len(runs) == 1:
        return runs[0]
    total = np.sum([r.lens for r in runs], axis=0)
    out = np.empty(int(total.sum()), np.uint8)
    offset = _excl_cumsum(total)
    for run in runs:
        if len(run.data):
            dest = np.repeat(offset - _excl_cumsum(run.lens), run.lens)
            dest += np.arange(len(run.data))
            out[dest] = run.data
        offset += run.lens
    return Ragged(out, total)


def tag_len(field_tag: int, body_lens: np.ndarray, present: np.ndarray) -> list[Field]:
    """Tag and length prefix of a length-delimited field, on present rows."""
    return [const(encode_varint(field_tag), present), varints(body_lens, present)]
