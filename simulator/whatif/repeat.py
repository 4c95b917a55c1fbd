"""Finding the repeated block of a sequence: transformer layers from op names and shapes.

A training step runs the same layer N times, so the op signatures of a phase (name plus
input shapes, one int per op) contain one block repeated back to back. `find_repeat`
returns the run that covers the most ops (ties: the shortest block), which is the layer
stack: a block twice as long covers no more, and repeats inside a layer (three
transposes in a row) cover far less.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Repeat:
    """`count` back-to-back copies of a block of `period` items starting at `start`."""

    start: int
    period: int
    count: int

    def block(self, k: int) -> range:
        """Positions of the k-th copy."""
        first = self.start + k * self.period
        return range(first, first + self.period)

    @property
    def end(self) -> int:
        return self.start + self.period * self.count


def find_repeat(
    signature: Sequence[int], detail: Sequence[int] | None = None, min_period: int = 2
) -> Repeat | None:
    """The back-to-back repetition covering the most items, or None when none repeats.

    `detail` refines `signature` (op name) where it is known (input shapes; -1 where the
    trace lost them): two items match when their signatures match and their details do,
    or one of the details is unknown.
    """
    seq = np.asarray(signature, np.int64)
    det = np.asarray(detail if detail is not None else [0] * len(seq), np.int64)
    n = len(seq)
    best: Repeat | None = None
    for period in range(min_period, n // 2 + 1):
        a, b = det[:-period], det[period:]
        eq = (seq[:-period] == seq[period:]) & ((a == b) | (a < 0) | (b < 0))
        if not eq.any():
            continue
        # runs of equal items: a run of r >= period means r + period periodic items
        padded = np.concatenate(([False], eq, [False]))
        edges = np.flatnonzero(padded[1:] != padded[:-1])
        starts, stops = edges[0::2], edges[1::2]
        lengths = stops - starts
        ok = lengths >= period
        if not ok.any():
            continue
        k = int(np.argmax(np.where(ok, lengths, -1)))
        count = (int(lengths[k]) + period) // period
        cand = Repeat(int(starts[k]), period, count)
        if best is None or cand.count * cand.period > best.count * best.period:
            best = cand
    return best
