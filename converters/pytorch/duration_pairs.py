"""Chrome-trace duration events written as a begin / end pair ("ph": "B" then "E") instead
of one complete event ("ph": "X").

Kineto writes only complete events, but traces passed through other tools (or written by
other profilers in the Chrome format) may hold pairs. The format nests them per thread: an
"E" closes the latest open "B" of the same (pid, tid), and may omit the name, category and
args, which come from its "B" (its own args are merged over them). Each closed pair becomes
the complete event it stands for, so it is read like Kineto's own; an "E" with nothing open
and a "B" never closed are counted, never dropped silently (`unpaired`)."""

from __future__ import annotations

from typing import Any

#: the phases of a begin / end pair
PAIRED = ("B", "E")


class DurationPairs:
    """Open "B" events per (pid, tid), closed by "E" into complete events."""

    def __init__(self) -> None:
        self.open: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
        self.paired = 0
        self.unmatched_ends = 0

    def feed(self, raw: dict[str, Any]) -> dict[str, Any] | None:
        """A "B" is held (None); an "E" returns its pair as a complete "X" event, or None
        when no "B" is open on its thread."""
        key = (raw.get("pid", 0), raw.get("tid", 0))
        if raw.get("ph") == "B":
            self.open.setdefault(key, []).append(raw)
            return None
        stack = self.open.get(key)
        if not stack:
            self.unmatched_ends += 1
            return None
        begin = stack.pop()
        self.paired += 1
        event = {**begin, "ph": "X", "dur": _minus(raw.get("ts"), begin.get("ts"))}
        if isinstance(raw.get("args"), dict) and raw["args"]:
            event["args"] = {**(begin.get("args") or {}), **raw["args"]}
        return event

    @property
    def unpaired(self) -> int:
        """Ends with no begin, plus begins never ended."""
        return self.unmatched_ends + sum(len(s) for s in self.open.values())


def _minus(end: Any, start: Any) -> Any:
    """end - start in the trace's µs, or the end itself when either is not a number (the
    reader then rejects the event naming it)."""
    try:
        return float(end) - float(start)
    except (TypeError, ValueError):
        return end
