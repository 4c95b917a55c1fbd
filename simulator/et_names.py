"""Node names numbered by first appearance, for a whole chunk of nodes at once.

Each name (a byte span of the chunk) is hashed 8 bytes at a time in numpy; names whose
hash is new get the next numbers, in order of first appearance. Then every name is
compared byte for byte with the name its number stands for, so a hash collision can
never merge two names: a name that differs is reported back (`NameTable.add` returns it
as a mismatch) and its node is read by protobuf instead.
"""

from __future__ import annotations

import numpy as np

from lumos.simulator.et_wire import PAD

MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], np.uint64)
_POW_BITS = 16
_MUL = np.uint64(0x9E3779B97F4A7C15)
_LEN = np.uint64(0xC2B2AE3D27D4EB4F)


def _powers(count: int) -> np.ndarray:
    """Powers of the hash's multiplier modulo 2**64 (integer products wrap in numpy)."""
    steps = np.full(count, 0x100000001B3, np.uint64)
    steps[0] = 1
    return np.cumprod(steps, dtype=np.uint64)


_POW = _powers(1 << _POW_BITS)


def words(buf: np.ndarray) -> np.ndarray:
    """Little-endian 8-byte words starting at every byte of `buf` (a strided view)."""
    return np.ndarray((len(buf) - 7,), "<u8", buf, 0, (1,))


def _span_words(
    view: np.ndarray, at: np.ndarray, size: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(words, owner span, word number) of every span, the last word of each masked."""
    count = (size + 7) // 8
    total = int(count.sum())
    owner = np.repeat(np.arange(len(at)), count)
    first = np.zeros(len(at), np.int64)
    np.cumsum(count[:-1], out=first[1:])
    k = np.arange(total, dtype=np.int64) - first[owner]
    w = view[at[owner] + 8 * k]
    w &= MASKS[np.minimum(size[owner] - 8 * k, 8)]
    return w, owner, k


def name_hashes(w: np.ndarray, k: np.ndarray, size: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each span's bytes (equal bytes, equal hash) from its `_span_words`."""
    x = w * _MUL
    x ^= x >> np.uint64(29)
    x *= _POW[k & ((1 << _POW_BITS) - 1)]
    h = np.zeros(len(size), np.uint64)
    nonempty = np.flatnonzero(size > 0)
    if len(nonempty):
        starts = np.zeros(len(size), np.int64)
        np.cumsum(((size + 7) // 8)[:-1], out=starts[1:])
        h[nonempty] = np.add.reduceat(x, starts[nonempty])
    return h ^ (size.astype(np.uint64) * _LEN)


class NameTable:
    """Every distinct name seen, numbered by first appearance."""

    def __init__(self) -> None:
        self.raw: list[bytes] = []
        self._keys = np.zeros(0, np.uint64)  # sorted hashes
        self._index = np.zeros(0, np.int64)  # name number of each sorted hash
        self._store = bytearray()  # the names back to back, for the byte comparison
        self._store_at: list[int] = []

    def intern(self, raw: bytes) -> int:
        """The number of name `raw` (a new number if it is new)."""
        view = words(np.frombuffer(raw + bytes(PAD), np.uint8))
        size = np.array([len(raw)], np.int64)
        w, _, k = _span_words(view, np.zeros(1, np.int64), size)
        h = name_hashes(w, k, size)
        pos = int(np.searchsorted(self._keys, h[0]))
        while pos < len(self._keys) and self._keys[pos] == h[0]:
            if self.raw[int(self._index[pos])] == raw:
                return int(self._index[pos])
            pos += 1
        number = len(self.raw)
        self._store_at.append(len(self._store))
        self.raw.append(raw)
        self._store += raw
        self._keys = np.insert(self._keys, pos, h[0])
        self._index = np.insert(self._index, pos, number)
        return number

    def add(
        self, data: bytes | bytearray, buf: np.ndarray, at: np.ndarray, size: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(number of each span's name, spans whose bytes differ from that name's)."""
        if not len(at):
            return np.zeros(0, np.int32), np.zeros(0, bool)
        w, owner, k = _span_words(words(buf), at, size)
        h = name_hashes(w, k, size)
        idx = np.full(len(h), -1, np.int64)
        if len(self._keys):  # after the first chunk nearly every name is known
            pos = np.minimum(np.searchsorted(self._keys, h), len(self._keys) - 1)
            known = self._keys[pos] == h
            idx[known] = self._index[pos[known]]
        else:
            known = np.zeros(len(h), bool)
        todo = np.flatnonzero(~known)
        if len(todo):
            uniq, first, inverse = np.unique(h[todo], return_index=True, return_inverse=True)
            order = np.argsort(first)
            number = np.empty(len(uniq), np.int64)
            number[order] = np.arange(len(self.raw), len(self.raw) + len(uniq))
            for s in todo[first[order]].tolist():
                start, length = int(at[s]), int(size[s])
                self._store_at.append(len(self._store))
                raw = bytes(data[start : start + length])
                self.raw.append(raw)
                self._store += raw
            keys = np.concatenate((self._keys, uniq))
            index = np.concatenate((self._index, number))
            order = np.argsort(keys)
            self._keys, self._index = keys[order], index[order]
            idx[todo] = number[inverse.reshape(-1)]
        return idx.astype(np.int32), self._differs(w, owner, k, size, idx)

    def _differs(
        self, w: np.ndarray, owner: np.ndarray, k: np.ndarray, size: np.ndarray, idx: np.ndarray
    ) -> np.ndarray:
        """Whether each span's bytes differ from those of the name it was numbered as."""
        store = np.frombuffer(bytes(self._store) + bytes(PAD), np.uint8)
        store_at = np.asarray(self._store_at, np.int64)
        lengths = np.fromiter(map(len, self.raw), np.int64, len(self.raw))
        differs = lengths[idx] != size
        if differs.any():  # compare only spans as long as their name
            keep = ~differs[owner]
            w, owner, k = w[keep], owner[keep], k[keep]
        mine = words(store)[store_at[idx[owner]] + 8 * k]
        mine &= MASKS[np.minimum(size[owner] - 8 * k, 8)]
        differs[owner[w != mine]] = True
        return differs
