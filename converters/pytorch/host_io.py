"""Host ops' inputs and outputs, kept as the bytes of Chakra `Node` fields.

The writer copies a node's `inputs` (field 8) and `outputs` (field 9) straight from here,
so each op's tensor lists are turned into compact JSON and framed once, at load time
(`encode_io`, `io_field` for the common short case). `ByteRows` keeps them per row in a
few large buffers rather than one small object each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from lumos.converters.chakra.varint import encode_varint

_VARINT = [encode_varint(i) for i in range(1 << 14)]


def _enc_str(tag: bytes, text: bytes) -> bytes:
    size = len(text)
    return tag + (_VARINT[size] if size < 16384 else encode_varint(size)) + text


def encode_io(tag: bytes, values: Any, shapes: Any, types: Any) -> bytes:
    """A Node `inputs` (tag b"B") or `outputs` (b"J") field: the lists as compact JSON."""
    info = (
        _enc_str(b"\n", orjson.dumps(values))
        + _enc_str(b"\x12", orjson.dumps(shapes))
        + _enc_str(b"\x1a", orjson.dumps(types))
    )
    return _enc_str(tag, info)


_VARLEN = [len(encode_varint(i)) for i in range(1 << 14)]


def io_field(tag: bytes, values: Any, shapes: Any, types: Any) -> bytes:
    """`encode_io` in one join (the common case of short lists)."""
    dumps, var = orjson.dumps, _VARINT
    v, sh, t = dumps(values), dumps(shapes), dumps(types)
    lv, ls, lt = len(v), len(sh), len(t)
    if lv >= 16384 or ls >= 16384 or lt >= 16384:
        return encode_io(tag, values, shapes, types)
    size = 3 + lv + ls + lt + _VARLEN[lv] + _VARLEN[ls] + _VARLEN[lt]
    if size >= 16384:
        return encode_io(tag, values, shapes, types)
    return b"".join((tag, var[size], b"\n", var[lv], v, b"\x12", var[ls], sh, b"\x1a", var[lt], t))


@dataclass(slots=True)
class ByteRows:
    """One byte string per row, kept in a few big buffers (row i: blobs[part[i]][starts:ends])."""

    blobs: list[bytes]
    part: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> memoryview:
        blob = self.blobs[int(self.part[i])]
        return memoryview(blob)[int(self.starts[i]) : int(self.ends[i])]

    def views(self, rows: np.ndarray) -> list[memoryview]:
        """Rows' bytes (-1: empty), without copying."""
        views = [memoryview(b) for b in self.blobs] or [memoryview(b"")]
        safe = np.maximum(rows, 0)
        empty = rows < 0
        part = np.where(empty, 0, self.part[safe]).tolist()
        starts = np.where(empty, 0, self.starts[safe]).tolist()
        ends = np.where(empty, 0, self.ends[safe]).tolist()
        return [views[p][a:b] for p, a, b in zip(part, starts, ends, strict=True)]


def no_rows() -> ByteRows:
    return ByteRows([], np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64))
