"""Runtime synchronisation: what a sync call or a stream wait waits for, resolved as it runs.

A CUDA stream is FIFO, so "everything launched on stream s so far" is a count: the sync
waits until that many ops of s have completed. `cudaEventRecord` snapshots (stream, count)
under its event id; `cudaEventSynchronize` waits for that snapshot; `cudaStreamWaitEvent`
puts a marker into the waiting stream's queue that holds later ops back until the snapshot
is reached; `cudaStreamSynchronize` / `cudaDeviceSynchronize` wait for one / all streams of
the rank. Resolving this while simulating (instead of trusting the recorded edges only)
keeps syncs right after what-if edits change what is on a stream.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from lumos.simulator.graph import SyncKind

#: Waiter tokens: a node index (>= 0) resumes that node; -(p + 1) re-examines processor p.
Token = int


class RuntimeSync:
    """Per-stream launch/completion counters and the waiters on them (global indices)."""

    __slots__ = ("_pending", "done", "enqueued", "events", "markers", "stream_of", "waiters")

    def __init__(self, n_procs: int, stream_of: Sequence[dict[int, int]]) -> None:
        #: stream_of[k]: stream id -> global processor index, for simulated rank slot k.
        self.stream_of = stream_of
        self.enqueued = [0] * n_procs
        self.done = [0] * n_procs
        self.waiters: list[list[tuple[int, Token]]] = [[] for _ in range(n_procs)]
        self.events: dict[tuple[int, int], tuple[int, int]] = {}
        self.markers: list[tuple[int, int]] = []
        self._pending: dict[Token, int] = {}

    def finished(self, p: int) -> list[Token]:
        """One op of processor p completed; the waiters that are now released."""
        self.done[p] += 1
        heap = self.waiters[p]
        if heap and heap[0][0] <= self.done[p]:
            return self.released(p)
        return []

    def released(self, p: int) -> list[Token]:
        """Waiters of p satisfied by its current `done` count (the scheduler bumps `done`
        itself on its hot path and calls this only when the first waiter is due)."""
        heap = self.waiters[p]
        released: list[Token] = []
        while heap and heap[0][0] <= self.done[p]:
            token = heapq.heappop(heap)[1]
            left = self._pending[token] - 1
            if left:
                self._pending[token] = left
            else:
                del self._pending[token]
                released.append(token)
        return released

    def record(self, slot: int, event: int, stream: int) -> None:
        """cudaEventRecord: remember how far `stream` has been launched."""
        p = self.stream_of[slot].get(stream)
        if p is not None:
            self.events[(slot, event)] = (p, self.enqueued[p])

    def _targets(self, slot: int, kind: int, stream: int, event: int) -> list[tuple[int, int]]:
        if kind == SyncKind.DEVICE:
            procs = self.stream_of[slot].values()
            return [(p, self.enqueued[p]) for p in procs]
        if kind == SyncKind.STREAM:
            p = self.stream_of[slot].get(stream)
            return [] if p is None else [(p, self.enqueued[p])]
        target = self.events.get((slot, event))
        return [] if target is None else [target]

    def block(self, token: Token, slot: int, kind: int, stream: int, event: int) -> bool:
        """Register `token` to wait for a sync's targets; False if nothing to wait for."""
        todo = [(p, k) for p, k in self._targets(slot, kind, stream, event) if self.done[p] < k]
        if not todo:
            return False
        self._pending[token] = len(todo)
        for p, k in todo:
            heapq.heappush(self.waiters[p], (k, token))
        return True

    def block_until(self, token: Token, p: int, count: int) -> bool:
        """Register `token` to wait until `count` ops of processor p have completed (a
        blocking copy call: its stream up to its copy); False if they already have."""
        if self.done[p] >= count:
            return False
        self._pending[token] = 1
        heapq.heappush(self.waiters[p], (count, token))
        return True

    def add_marker(self, slot: int, event: int) -> int | None:
        """cudaStreamWaitEvent: a marker id for the waiting stream's queue, or None."""
        target = self.events.get((slot, event))
        if target is None:
            return None
        self.markers.append(target)
        return len(self.markers) - 1

    def marker_blocks(self, marker: int, token: Token) -> bool:
        """Whether a queue-head marker still holds its stream; registers `token` if so."""
        p, k = self.markers[marker]
        if self.done[p] >= k:
            return False
        if token not in self._pending:
            self._pending[token] = 1
            heapq.heappush(self.waiters[p], (k, token))
        return True
