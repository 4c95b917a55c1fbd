"""The domain-free event kernel: an integer-nanosecond clock and a heap of events.

An event is `(time, priority, item)` packed into one Python int
`time << TIME_SHIFT | priority << PRIO_SHIFT | item`, so the heap compares plain ints
(about twice as fast as tuples). Events pop in (time, priority, item) order. `item` is a
caller-chosen non-negative id below 2**PRIO_SHIFT, unique among pending events (the
scheduler uses node index × 8 + event kind); ordering ties on it rather than on insertion
order makes a run bit-reproducible *and* independent of which other ranks are simulated
alongside — what exact symmetry folding needs. Hot loops may inline the packing with the
constants below; `push`/`pop` are the readable form.
"""

from __future__ import annotations

import heapq

PRIO_SHIFT = 40
TIME_SHIFT = 42
ITEM_MASK = (1 << PRIO_SHIFT) - 1
PRIO_MASK = 3
MAX_PRIORITY = 3


def pack(time: int, priority: int, item: int) -> int:
    """The heap key of an event."""
    return (time << TIME_SHIFT) | (priority << PRIO_SHIFT) | item


def unpack(key: int) -> tuple[int, int, int]:
    """(time, priority, item) of a heap key."""
    return key >> TIME_SHIFT, (key >> PRIO_SHIFT) & PRIO_MASK, key & ITEM_MASK


class EventQueue:
    """A min-heap of packed events with a clock that never goes backwards."""

    __slots__ = ("heap", "now", "popped")

    def __init__(self) -> None:
        self.heap: list[int] = []
        self.now = 0
        self.popped = 0

    def push(self, time: int, priority: int, item: int) -> None:
        """Schedule `item` at `time` (>= now). Raises ValueError for a past time."""
        if time < self.now:
            raise ValueError(f"event at {time} ns scheduled in the past (now {self.now} ns)")
        heapq.heappush(self.heap, (time << TIME_SHIFT) | (priority << PRIO_SHIFT) | item)

    def pop(self) -> tuple[int, int, int]:
        """Remove the earliest event and advance the clock to it."""
        key = heapq.heappop(self.heap)
        self.now = key >> TIME_SHIFT
        self.popped += 1
        return self.now, (key >> PRIO_SHIFT) & PRIO_MASK, key & ITEM_MASK

    def __len__(self) -> int:
        return len(self.heap)
