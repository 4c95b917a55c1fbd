"""The GPU ops of each stream in stream order, searchable by the time they were launched."""

from __future__ import annotations

import bisect


class StreamIndex:
    """GPU tasks of each stream (in stream order), searchable by launch time."""

    def __init__(self, streams: dict[int, list[int]], launch_ts: dict[int, int]) -> None:
        self.ops = streams
        self.launch = {s: [launch_ts[t] for t in ops] for s, ops in streams.items()}

    def last_before(self, stream: int, ts: int) -> int | None:
        """The last op of `stream` launched before `ts` (None: none)."""
        times = self.launch.get(stream)
        if not times:
            return None
        k = bisect.bisect_left(times, ts) - 1
        return self.ops[stream][k] if k >= 0 else None

    def first_after(self, stream: int, ts: int) -> int | None:
        """The first op of `stream` launched after `ts` (None: none)."""
        times = self.launch.get(stream)
        if not times:
            return None
        k = bisect.bisect_right(times, ts)
        return self.ops[stream][k] if k < len(times) else None
