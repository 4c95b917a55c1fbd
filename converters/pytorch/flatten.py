"""Flattening nested host events of one CPU thread into non-overlapping segments.

A processor runs one task at a time, so an op that calls other ops cannot be one node:
its self time is split around its children (`P[0,10) C[10,30) P[30,50) D[50,60) P[60,100)`).
Every leaf becomes exactly one segment (even of zero length: it may launch GPU work or
carry shapes); a parent's segments are kept only where they have length. Atomic events
(gloo collectives) keep whatever is nested in them out of the graph. Segments of the
events in `keep_chain` (gloo ops, launches of NCCL kernels) also get the chain of events
enclosing them, so a kernel's CPU parent is the innermost op around its launch. One pass with a
stack over plain integer lists. `sends_first` then moves each gloo send before the
`c10d::send` that issued it, where the transport got its buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lumos.converters.pytorch.kineto import KinetoTrace

#: tie order of events starting together: ops and annotations, then runtime calls.
KIND_RANK = np.array([0, 0, 1, 2, 2], np.int64)


@dataclass(slots=True)
class Segments:
    """Pieces [start, end) of events (Kineto rows `ev`); `head` marks an event's first piece."""

    ev: list[int] = field(default_factory=list)
    start: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)
    head: list[bool] = field(default_factory=list)
    #: segment index → enclosing Kineto rows, outermost first (only for `keep_chain` events).
    chain: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def compact(self) -> Segments:
        """The same segments with numpy columns (cheap to pickle)."""
        return Segments(
            np.asarray(self.ev, np.int64),  # type: ignore[arg-type]
            np.asarray(self.start, np.int64),  # type: ignore[arg-type]
            np.asarray(self.end, np.int64),  # type: ignore[arg-type]
            np.asarray(self.head, bool),  # type: ignore[arg-type]
            self.chain,
        )


def thread_order(trace: KinetoTrace, rows: np.ndarray) -> np.ndarray:
    """rows sorted by (ts, -dur, kind rank, external id), ties in file order."""
    return rows[
        np.lexsort(
            (
                rows,
                trace.ext[rows],
                KIND_RANK[trace.kind[rows]],
                -trace.dur[rows],
                trace.ts[rows],
            )
        )
    ]


def flatten_thread(
    trace: KinetoTrace, rows: np.ndarray, atomic: np.ndarray, keep_chain: np.ndarray, out: Segments
) -> None:
    """Append the segments of one thread's events (`rows` in `thread_order`) to `out`.

    `atomic` is a per-name-id flag, `keep_chain` a per-row one.
    """
    names = trace.name[rows]
    row_l = rows.tolist()
    ts_l = trace.ts[rows].tolist()
    end_l = (trace.ts[rows] + trace.dur[rows]).tolist()
    atom_l = atomic[names].tolist()
    keep_l = keep_chain[rows].tolist()
    o_ev, o_start, o_end, o_head, chain = out.ev, out.start, out.end, out.head, out.chain
    st_k: list[int] = []
    st_end: list[int] = []
    st_emit: list[bool] = []
    st_child: list[bool] = []
    cursor = ts_l[0] if ts_l else 0  # not 0: `ts` may be negative (a re-based trace)
    for k in range(len(row_l) + 1):
        t = ts_l[k] if k < len(row_l) else 1 << 62
        while st_end and st_end[-1] <= t:
            kk = st_k.pop()
            e = st_end.pop()
            emitted = st_emit.pop()
            had_child = st_child.pop()
            if e > cursor or (not had_child and not emitted):
                if keep_l[kk]:
                    chain[len(o_ev)] = tuple([row_l[x] for x in st_k])
                o_ev.append(row_l[kk])
                o_start.append(cursor if cursor > ts_l[kk] else ts_l[kk])
                o_end.append(e)
                o_head.append(not emitted)
            if e > cursor:
                cursor = e
        if k == len(row_l):
            break
        e = end_l[k]
        if st_k:
            top = st_k[-1]
            if atom_l[top]:
                continue
            if st_end[-1] < e:
                e = st_end[-1]
            if t > cursor:
                if keep_l[top]:
                    chain[len(o_ev)] = tuple([row_l[x] for x in st_k[:-1]])
                o_ev.append(row_l[top])
                o_start.append(cursor)
                o_end.append(t)
                o_head.append(not st_emit[-1])
                st_emit[-1] = True
            st_child[-1] = True
        if t > cursor:
            cursor = t
        st_k.append(k)
        st_end.append(e)
        st_emit.append(False)
        st_child.append(False)


def sends_first(
    trace: KinetoTrace, out: Segments, lo: int, is_send: np.ndarray, is_host_send: np.ndarray
) -> None:
    """Put each send of one thread's segments (`out[lo:]`) before the host op that issued it.

    gloo hands a send's buffer to the transport when `c10d::send` starts, but its
    `gloo:send` annotation (the Work's record function) begins only as that call returns:
    nested in its end or right after it on the thread. Replaying that order delivers the
    data late by the call's duration. The send moves before the op's segments (and those
    of its children): it starts where the op started, and the moved segments follow it,
    shifted by its duration, so the thread still never runs two at once and the op's
    `gap_ns` falls on the send. A send found right after the op gets it as enclosing op
    (for its peer and tag). `is_send` and `is_host_send` are per-name-id flags.
    """
    ev, start, chain = out.ev, out.start, out.chain
    name = trace.name
    found = np.flatnonzero(is_send[name[np.asarray(ev[lo:], np.int64)]]) + lo
    for i in found.tolist():
        outer = chain.get(i, ())
        host = next((r for r in reversed(outer) if is_host_send[name[r]]), -1)
        if host < 0 and i > lo and is_host_send[name[ev[i - 1]]]:
            host = ev[i - 1]
            outer = (*outer, host)
        if host < 0:
            continue
        first = i
        while first > lo and start[first - 1] >= trace.ts[host]:
            first -= 1
        if first < i:
            _rotate(out, first, i)
        chain[first] = outer


def _rotate(out: Segments, first: int, last: int) -> None:
    """Move segment `last` to position `first`, at its start; shift the others by its length."""
    length = out.end[last] - out.start[last]
    at = out.start[first]
    moved = {k + 1: out.chain.pop(k) for k in range(last - 1, first - 1, -1) if k in out.chain}
    out.chain.pop(last, None)
    out.chain.update(moved)
    out.ev.insert(first, out.ev.pop(last))
    out.head.insert(first, out.head.pop(last))
    shifted = [s + length for s in out.start[first:last]]
    out.start[first : last + 1] = [at, *shifted]
    out.end[first : last + 1] = [at + length, *[e + length for e in out.end[first:last]]]
