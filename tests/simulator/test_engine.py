"""The event kernel: ordering by (time, priority, item), monotonic clock."""

from __future__ import annotations

import pytest

from lumos.simulator.engine import EventQueue, pack, unpack


def test_events_pop_in_time_priority_item_order() -> None:
    q = EventQueue()
    for time, prio, item in [(50, 0, 3), (10, 1, 1), (10, 0, 9), (10, 0, 2), (7, 3, 0)]:
        q.push(time, prio, item)
    order = [q.pop() for _ in range(len(q))]
    assert order == [(7, 3, 0), (10, 0, 2), (10, 0, 9), (10, 1, 1), (50, 0, 3)]
    assert q.now == 50
    assert q.popped == 5


def test_pack_roundtrip_and_past_events_refused() -> None:
    assert unpack(pack(123_456_789_000, 2, 77)) == (123_456_789_000, 2, 77)
    q = EventQueue()
    q.push(100, 0, 1)
    q.pop()
    with pytest.raises(ValueError, match="in the past"):
        q.push(99, 0, 2)
