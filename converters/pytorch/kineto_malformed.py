"""Naming the Kineto event that broke a batch, and why.

The batch reader (`kineto._Columns`) converts a whole batch at once; when that fails,
this finds the first complete event (or half of a `B`/`E` pair) whose name, category or
args have the wrong JSON type, or whose pid, tid or id argument is a number past 64
bits (no profiler writes one; numpy cannot hold it; the JSON reader gives 2^64 and up as
a float).
"""

from __future__ import annotations

from typing import Any

from lumos.converters.pytorch.duration_pairs import PAIRED

#: the integer fields read from an event, and from its args
_EVENT_INTS = ("pid", "tid")
_ARG_INTS = ("External id", "Record function id", "correlation", "stream")
_LOW, _HIGH = -(2**63), 2**63 - 1


def malformed(batch: list[Any]) -> tuple[int, str | None]:
    """(index in the batch, reason) of the first bad event; (-1, None) if none is found."""
    for index, raw in enumerate(batch):
        if type(raw) is not dict or (raw.get("ph") != "X" and raw.get("ph") not in PAIRED):
            continue
        for key, want in (("name", str), ("cat", str), ("args", dict)):
            value = raw.get(key)
            if value is not None and not isinstance(value, want):
                kind = "a string" if want is str else "an object"
                return index, f"event {key!r} is {value!r:.60}, not {kind}"
        args = raw.get("args") or {}
        for key, value in [(k, raw.get(k)) for k in _EVENT_INTS] + [
            (k, args.get(k)) for k in _ARG_INTS
        ]:
            if type(value) in (int, float) and not _LOW <= value <= _HIGH:  # type: ignore[operator]
                name = raw.get("name", "")
                return index, f"event {name!r:.200}: {key!r} is {value!r}, past 64 bits"
    return -1, None
