"""One ring collective on ASTRA-sim's congestion-aware analytical network, message by message.

The congestion-aware backend sends every message store-and-forward along its route (a
Switch: NPU -> switch -> NPU; a Ring: the shorter way round; FullyConnected: one link).
A link carries one message at a time, first come first served: a message of S bytes
holds it for `int(S/B)` ns and reaches the next device `int(L + S/B)` ns after it started.
The chunks of a collective that run at once (`active-chunks-per-dimension`) share their
rank's links, so they queue. The ring steps are those of `ring_members` (send after the
endpoint delay, receive when the message is in and the receive posted, then delay and
reduction); here they run as events on one clock so queueing is exact. Other traffic
(other collectives, send/recv) is not on these links.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: A route: the devices a message visits, source first (NPUs 0..N-1, a switch N).
Route = list[int]


@dataclass(slots=True)
class _Link:
    busy: bool = False
    queue: deque[tuple[int, int, int, int]] = field(default_factory=deque)


@dataclass(frozen=True, slots=True)
class RingPlan:
    """What one collective's ring does: members in ring order, steps, message size."""

    ring: Sequence[int]  # global NPU id of each ring position
    steps: int
    reducing: int
    message_bytes: int
    chunks: int
    slots: int
    delay_ns: int
    reduce_ns: int


def run_ring(
    plan: RingPlan,
    arrivals: Sequence[int],
    route: Callable[[int, int], Route],
    link_time: Callable[[int], tuple[int, int]],
) -> list[int]:
    """Finish per ring position. `link_time(bytes)` -> (busy ns, arrival ns) of one hop."""
    n = len(plan.ring)
    busy_ns, hop_ns = link_time(plan.message_bytes)
    links: dict[tuple[int, int], _Link] = {}
    heap: list[tuple[int, int, int, tuple[int, ...]]] = []
    seq = 0
    arrived: set[tuple[int, int, int]] = set()
    posted: set[tuple[int, int, int]] = set()
    next_chunk = [0] * n
    finish = list(arrivals)
    paths = [route(plan.ring[p], plan.ring[(p + 1) % n]) for p in range(n)]
    start_ev, send_ev, free_ev, hop_ev, recv_ev, done_ev = range(6)

    def push(t: int, kind: int, args: tuple[int, ...]) -> None:
        nonlocal seq
        heapq.heappush(heap, (t, seq, kind, args))
        seq += 1

    def transmit(key: tuple[int, int], msg: tuple[int, int, int, int], t: int) -> None:
        links[key].busy = True
        push(t + hop_ns, hop_ev, msg)
        push(t + busy_ns, free_ev, key)

    def enter(msg: tuple[int, int, int, int], t: int) -> None:
        src, hop = msg[0], msg[3]
        path = paths[src]
        key = (path[hop], path[hop + 1])
        link = links.setdefault(key, _Link())
        if link.busy:
            link.queue.append(msg)
        else:
            transmit(key, msg, t)

    def received(p: int, c: int, k: int, t: int) -> None:
        extra = plan.delay_ns + (plan.reduce_ns if k < plan.reducing else 0)
        push(t + extra, send_ev if k + 1 < plan.steps else done_ev, (p, c, k + 1))

    for p, a in enumerate(arrivals):
        for _ in range(min(plan.slots, plan.chunks)):
            push(a, start_ev, (p, next_chunk[p]))
            next_chunk[p] += 1
    while heap:
        t, _, kind, args = heapq.heappop(heap)
        if kind == start_ev:
            p, c = args
            push(t + plan.delay_ns, send_ev, (p, c, 0))
        elif kind == send_ev:
            p, c, k = args
            posted.add((p, c, k))
            enter((p, c, k, 0), t)
            if (p, c, k) in arrived:
                push(t, recv_ev, (p, c, k))
        elif kind == free_ev:
            link = links[(args[0], args[1])]
            link.busy = False
            if link.queue:
                transmit((args[0], args[1]), link.queue.popleft(), t)
        elif kind == hop_ev:
            src, c, k, hop = args
            if hop + 2 < len(paths[src]):
                enter((src, c, k, hop + 1), t)
                continue
            dst = (src + 1) % n
            if (dst, c, k) in posted:
                received(dst, c, k, t)
            else:
                arrived.add((dst, c, k))
        elif kind == recv_ev:
            received(args[0], args[1], args[2], t)
        else:  # done: the chunk left this rank; its slot takes the next chunk
            p = args[0]
            finish[p] = max(finish[p], t)
            if next_chunk[p] < plan.chunks:
                push(t, start_ev, (p, next_chunk[p]))
                next_chunk[p] += 1
    return finish
