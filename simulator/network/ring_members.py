"""Per-member finish times of one collective in ASTRA-sim's analytical backend.

When the members of a collective arrive at different times, ASTRA-sim does not end them
together: each rank's ring runs message by message. Per chunk and ring position p (ranks
in ring order, p receives from p-1), with S steps (all-reduce 2(n-1), all-to-all
n(n-1)/2, others n-1), endpoint delay d, message time N(edge, m) and reduction R(m):

    send_p(0)   = start_p + d
    recv_p(k)   = max(send_{p-1}(k) + N(p-1 -> p), send_p(k))   (recv posted with the send)
    send_p(k+1) = recv_p(k) + d + R_k                             (R on reducing steps)
    finish_p    = recv_p(S-1) + d + R_{S-1}

R_k = R(m) on every step of a reduce-scatter and on the first n-1 of an all-reduce. A
rank starts chunk c when it arrived and one of its `active-chunks-per-dimension` slots is
free (chunks of one collective run in order). With equal arrivals this is the closed form
`AstraPricer` uses. An all-rank collective on a network of several dimensions runs
one such ring per line of each dimension in turn (the all-gathers that close an
all-reduce the other way round), when every chunk is in flight at once. Measured exact
against the real binary (tests/converters/astra_sim/test_binary.py); non-ring
implementations, and several dimensions with more chunks than active slots, are not
covered (`member_finish` returns None and the caller ends the members together).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

ALL_REDUCE, ALL_GATHER, ALL_TO_ALL, REDUCE_SCATTER = 0, 2, 6, 7


def ring_steps(kind: int, n: int) -> tuple[int, int, int]:
    """(steps, reducing steps from the start, message bytes per `chunk`-byte unit
    divisor) of a ring collective of n members."""
    if kind == ALL_REDUCE:
        return 2 * (n - 1), n - 1, n
    if kind == REDUCE_SCATTER:
        return n - 1, n - 1, n
    if kind == ALL_TO_ALL:
        return n * (n - 1) // 2, 0, n
    return n - 1, 0, 1  # all-gather: the whole chunk travels


def ring_finish(
    starts: Sequence[int],
    steps: int,
    reducing: int,
    edge_ns: Sequence[int],
    delay_ns: int,
    reduce_ns: int,
) -> list[int]:
    """Finish of each ring position for one chunk; `edge_ns[p]` is the message time from
    position p-1 to p."""
    n = len(starts)
    send = [s + delay_ns for s in starts]
    recv = send
    for k in range(steps):
        recv = [max(send[p - 1] + edge_ns[p], send[p]) for p in range(n)]
        extra = delay_ns + (reduce_ns if k < reducing else 0)
        send = [r + extra for r in recv]
    return send if steps else [s + delay_ns for s in starts]


def chunked_finish(
    arrivals: Sequence[int],
    chunks: int,
    slots: int,
    one_chunk: Callable[[list[int]], list[int]],
) -> list[int]:
    """Finish per member of `chunks` chunks run through `one_chunk` (starts -> finishes),
    each member running at most `slots` chunks at once, in order."""
    free = [[a] * slots for a in arrivals]
    finish = list(arrivals)
    for _ in range(chunks):
        starts = [heapq.heappop(pool) for pool in free]
        ends = one_chunk(starts)
        for pool, end in zip(free, ends, strict=True):
            heapq.heappush(pool, end)
        finish = [max(f, e) for f, e in zip(finish, ends, strict=True)]
    return finish
