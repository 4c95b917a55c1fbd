"""Checks of a host ET's node tree that a damaged or hand-edited file can fail.

PyTorch writes every node once, with a parent (`ctrl_deps`, `parent` in 1.0.1) that is
the root, a node of the trace, or itself (a root); the tree is then walked from its
roots. A node id given twice makes `row_of_id` keep one of them, and nodes whose parents
form a loop are never reached from a root, so both would silently change what is
converted: they are errors naming the ids. A schema version lumos does not list is read
as the closest one it knows, with a warning saying so.
"""

from __future__ import annotations

import logging

import numpy as np

from lumos.errors import TraceFormatError

log = logging.getLogger(__name__)


def check_host_tree(
    path: str, ids: np.ndarray, parent: np.ndarray, declared: str, read_as: str
) -> None:
    """Raise TraceFormatError naming `path` for a node id given twice or parents that form
    a loop (`ids` sorted, `parent` by row); warn when schema `declared` was `read_as`
    another version."""
    if declared != read_as:
        log.warning(
            "%s: host-ET schema %r is not one lumos lists; read as %s, the closest it knows",
            path,
            declared,
            read_as,
        )
    twice = np.flatnonzero(ids[1:] == ids[:-1])
    if len(twice):
        first = int(ids[twice[0]])
        raise TraceFormatError(
            path,
            f"node id {first} appears {int((ids == first).sum())} times"
            + (f" ({len(twice)} ids repeated in all)" if len(twice) > 1 else ""),
        )
    loop = _in_loops(ids, parent)
    if len(loop):
        shown = ", ".join(str(int(i)) for i in ids[loop[:5]])
        raise TraceFormatError(
            path,
            f"{len(loop)} node(s) never reached from a root: their chain of parents "
            f"(ctrl_deps / parent) loops; ids {shown}{', ...' if len(loop) > 5 else ''}",
        )


def _in_loops(ids: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Rows whose chain of parents never ends (at a root, an unknown id or a node that is
    its own parent), found by pointer doubling: O(n log depth) without a Python loop."""
    n = len(ids)
    if n == 0 or not (parent > ids).any():  # parents before children (PyTorch's order)
        return np.zeros(0, np.int64)  # a loop needs a parent with a larger id
    row = np.searchsorted(ids, parent)
    row[row >= n] = 0
    up = np.where((ids[row] == parent) & (parent != ids), row, -1)
    steps = 1
    while steps < 2 * n:
        live = up >= 0
        if not live.any():
            return np.zeros(0, np.int64)
        nxt = np.where(live, up[np.maximum(up, 0)], -1)
        if np.array_equal(nxt, up):
            break
        up = nxt
        steps *= 2
    return np.flatnonzero(up >= 0)
