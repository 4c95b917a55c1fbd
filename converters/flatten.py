"""Flattening nested host events of one CPU thread into non-overlapping segments.

A processor runs one task at a time, so an op that calls other ops cannot be one node:
its self time is split around its children (`P[0,10) C[10,30) P[30,50) D[50,60) P[60,100)`).
Every leaf becomes exactly one segment (even of zero length: it may launch GPU work or
carry shapes); a parent's segments are kept only where they have length. Atomic events
(gloo collectives) keep whatever is nested in them out of the graph. Each runtime call
also gets the chain of events enclosing it, so a kernel's CPU parent is the innermost op
around its launch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lumos.converters.kineto import KEvent, Kind


@dataclass(slots=True)
class Segment:
    """A piece [start, end) of `ev`'s time on its thread; `head` marks its first piece."""

    ev: KEvent
    start: int
    end: int
    head: bool
    enclosing: tuple[KEvent, ...] = ()


_KIND_RANK = {Kind.ANNOTATION: 0, Kind.CPU_OP: 0, Kind.RUNTIME: 1}


def thread_order_key(ev: KEvent) -> tuple[int, int, int, int]:
    return (ev.ts, -ev.dur, _KIND_RANK.get(ev.kind, 2), ev.ext)


def flatten_thread(events: list[KEvent], atomic: Callable[[KEvent], bool]) -> list[Segment]:
    """Segments of one thread's events, in time order (`events` sorted by thread_order_key)."""
    out: list[Segment] = []
    # stack entries: [event, end (clamped to the parent), has_emitted, had_child]
    stack: list[list[object]] = []
    cursor = 0

    def close_until(t: int) -> None:
        nonlocal cursor
        while stack and stack[-1][1] <= t:  # type: ignore[operator]
            ev, end, emitted, had_child = stack.pop()
            assert isinstance(ev, KEvent) and isinstance(end, int)
            if end > cursor or (not had_child and not emitted):
                out.append(Segment(ev, max(cursor, ev.ts), end, not emitted, _chain(stack)))
            cursor = max(cursor, end)

    for ev in events:
        close_until(ev.ts)
        end = ev.ts + ev.dur
        if stack:
            top = stack[-1]
            top_ev = top[0]
            assert isinstance(top_ev, KEvent)
            if atomic(top_ev):
                continue
            end = min(end, int(top[1]))  # type: ignore[call-overload]
            if ev.ts > cursor:
                out.append(Segment(top_ev, cursor, ev.ts, not top[2], _chain(stack[:-1])))
                top[2] = True
            top[3] = True
        cursor = max(cursor, ev.ts)
        stack.append([ev, end, False, False])
    close_until(1 << 62)
    for seg in out:
        if seg.ev.kind is not Kind.RUNTIME and not atomic(seg.ev):
            seg.enclosing = ()
    return out


def _chain(stack: list[list[object]]) -> tuple[KEvent, ...]:
    return tuple(entry[0] for entry in stack)  # type: ignore[misc]
