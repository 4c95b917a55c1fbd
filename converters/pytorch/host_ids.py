"""The integer fields of host-ET nodes, as int64 columns, refused where they cannot be ids.

A node's `id` must be a whole number in 0..2^63-1 and its parent (`ctrl_deps` or
`parent`) a whole number in int64 or absent: anything else (null, text, 488.5, true, a
negative id, 2^64) names no node, and was read as -1 or truncated without a word, or
overflowed numpy (an internal error). `rf_id`, `tid`, `seq_id` and `fw_parent` stay
lenient (a value that is not a number is -1, "none"), but an integer past 64 bits is
refused: no profiler writes one, so the file is damaged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lumos.errors import TraceFormatError

FIELDS = ("id", "parent", "rf_id", "tid", "seq_id", "fw_parent")
_LOW, _HIGH = -(2**63), 2**63 - 1


def int_matrix(
    rows: Sequence[tuple[Any, ...]], path: str, name_of: Callable[[int], str]
) -> np.ndarray:
    """(id, parent, rf_id, tid, seq_id, fw_parent) tuples → int64 matrix.

    `name_of(k)`: row k's node name, for the error. Raises TraceFormatError naming the
    file and node for an id or parent that names no node, or an integer past 64 bits.
    """
    if not rows:
        return np.zeros((0, len(FIELDS)), np.int64)
    _check_ids(rows, path, name_of)
    try:
        return np.asarray(rows, dtype=np.int64).reshape(len(rows), len(FIELDS))
    except (TypeError, ValueError, OverflowError):
        columns = list(zip(*rows, strict=True))
        out = [np.asarray(columns[0], np.int64), np.asarray([v or 0 for v in columns[1]], np.int64)]
        for col, values in enumerate(columns[2:], start=2):
            out.append(
                np.asarray(
                    [_lenient(v, rows, k, col, path, name_of) for k, v in enumerate(values)],
                    np.int64,
                )
            )
        return np.stack(out, axis=1)


def _check_ids(rows: Sequence[tuple[Any, ...]], path: str, name_of: Callable[[int], str]) -> None:
    ids = [r[0] for r in rows]
    parents = [r[1] for r in rows if r[1] is not None]
    if (
        {type(v) for v in ids} == {int}
        and {type(v) for v in parents} <= {int}
        and min(ids) >= 0
        and max(ids) <= _HIGH
        and (not parents or (min(parents) >= _LOW and max(parents) <= _HIGH))
    ):
        return
    for k, row in enumerate(rows):
        node_id, parent = row[0], row[1]
        if type(node_id) is not int or not 0 <= node_id <= _HIGH:
            _fail(path, rows, k, name_of, f"id {node_id!r} is not a node id (0 to 2^63 - 1)")
        if parent is not None and (type(parent) is not int or not _LOW <= parent <= _HIGH):
            _fail(path, rows, k, name_of, f"parent {parent!r} is not a node id")


def _lenient(
    value: Any,
    rows: Sequence[tuple[Any, ...]],
    k: int,
    col: int,
    path: str,
    name_of: Callable[[int], str],
) -> int:
    if type(value) is int:
        if not _LOW <= value <= _HIGH:
            _fail(path, rows, k, name_of, f"{FIELDS[col]} {value} is past 64 bits")
        return value
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return -1
    if not _LOW <= number <= _HIGH:  # 2^64 in a JSON file reads as a float
        _fail(path, rows, k, name_of, f"{FIELDS[col]} {value!r} is past 64 bits")
    return number


def _fail(
    path: str, rows: Sequence[tuple[Any, ...]], k: int, name_of: Callable[[int], str], why: str
) -> None:
    raise TraceFormatError(path, f"node {rows[k][0]!r} ({name_of(k)!r}): {why}")
