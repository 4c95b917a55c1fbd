"""Sorted distinct values of an integer column, as `np.unique` gives them, by sorting.

numpy >= 2 answers a bare `np.unique(a)` with a hash table, and imports `numpy.ma` on the
way (~15 ms of start-up for a command that needs nothing else of it); numpy's sort is
faster too (a 405k-node rank's thread and stream columns: 0.75 and 0.28 ms against 9.0
and 8.3 ms; 400k random ints below 1000: 2.4 against 12.4 ms).
"""

from __future__ import annotations

import numpy as np


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-d array, ascending (`np.unique(values)`)."""
    out = np.sort(values)
    if len(out) < 2:
        return out
    keep = np.empty(len(out), bool)
    keep[0] = True
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    return out[keep]
