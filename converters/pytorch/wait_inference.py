"""Cross-stream waits the trace does not resolve: record → wait pairs from program order.

Kineto names the event a `cudaStreamWaitEvent` waits on only in its `cuda_sync` events
(when the profiler enables them); older PyTorch/Kineto and ROCm traces keep the bare call
(`hipStreamWaitEvent` too), and some do not record `cudaEventRecord` at all. The
dependency is still in the launching thread's program order. The stream that waits is the
stream of the next launch after the wait; a wait after the thread's last launch (DDP's
`work.wait()` on the last bucket's all-reduce, whose next kernel on that stream the main
thread launches) makes the thread's current stream wait: the latest stream it launched
on other than the one waited for. What it waits for: when the thread records
events, the event recorded last before the wait (on the stream the trace names, else the
stream of the launch before the record; when that is the waiting stream itself, a copy
launched onto it just before the record, and the waiting op was held until the thread's
latest other stream's op ended, that other stream); a record on the waiting stream
itself orders nothing (`same_stream`). Without records, the most recently launched other stream; k
waits in a row before one launch wait for the k most recently launched other streams.
The first op launched on the waiting stream after the wait then waits for the last op
launched on the other stream before the record (or before the wait). An inferred edge is
kept only if the recorded kernel starts agree (the waiting op started no earlier than the
op it waits for ended). When the last record's op was still running, the wait was for
an earlier event (FSDP2 records the next all-gathers' events before waiting for this
one's): if the waiting op was held (`tasks.ready_ns`: it started more than
`GPU_GAP_MAX_NS` after its stream predecessor, launch and other dependencies ended) and
the op of one of the thread's earlier records on another stream ended within
`GPU_GAP_MAX_NS` before it started, the wait pairs with the latest such record. Other
contradicted pairs are counted as `rejected`, never added.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from lumos.converters.chakra import conventions as cv
from lumos.converters.pytorch.stream_index import StreamIndex
from lumos.converters.pytorch.tasks import GPU_GAP_MAX_NS, TaskTable, ready_ns

#: GPU timestamps of older Kineto traces are whole µs.
GPU_SLACK_NS = 1000
#: event ids lumos gives a `cudaEventRecord` paired with a wait by program order.
INFERRED_EVENT_BASE = cv.INFERRED_EVENT_BASE
#: records before the last one a wait may pair with instead (FSDP2 prefetches one or two
#: all-gathers ahead: their records come between an all-gather's record and its wait).
MAX_EARLIER = 32


@dataclass(frozen=True, slots=True)
class ThreadCalls:
    """One thread's runtime calls in program order and what each is.

    `task`: CPU task per call; `launched`: stream it launched on (-1: not a launch);
    `wait`: positions of the waits to pair; `record` / `record_stream`: positions of its
    event records and the stream each recorded on (-1: unknown); `record_guessed`: the
    stream is the thread's launch before the record, not one the trace names.
    """

    task: np.ndarray
    launched: np.ndarray
    wait: np.ndarray
    record: np.ndarray
    record_stream: np.ndarray
    record_guessed: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class _Found:
    """An inferred wait: the waiting task, the stream that waits, the edge, its record;
    `earlier`: (src, record) of the thread's earlier records, most recent first."""

    wait: int
    stream: int
    src: int
    dst: int
    record: int  # the cudaEventRecord task it pairs with, -1 when anchored on a launch
    earlier: tuple[tuple[int, int], ...] = ()


def infer_waits(table: TaskTable, calls: ThreadCalls, index: StreamIndex) -> dict[str, int]:
    """Add the edges of one thread's unresolved waits; returns counts by outcome."""
    counts = {"inferred": 0, "rejected": 0, "unresolved": 0, "same_stream": 0}
    for pair in _pairs(table, calls, index):
        if isinstance(pair, str):
            counts[pair] += 1
            continue
        attrs = table.attrs_of(pair.wait)
        attrs[cv.SYNC_STREAM] = pair.stream
        attrs[cv.SYNC_INFERRED] = True
        contradicted = int(table.start[pair.dst]) + GPU_SLACK_NS < table.end(pair.src)
        found = _earlier_event(table, pair) if contradicted else pair
        if found is None:
            counts["rejected"] += 1
            continue
        if found.src not in table.data_of(found.dst):  # waits in a row may name one op
            table.add_data(found.dst, found.src)
        counts["inferred"] += 1
        if found.record >= 0:
            rec = table.attrs_of(found.record)
            if cv.EVENT_RECORD not in rec:
                rec[cv.EVENT_RECORD] = INFERRED_EVENT_BASE + found.record
                rec[cv.SYNC_STREAM] = int(table.stream[found.src])
            attrs[cv.SYNC_EVENT] = rec[cv.EVENT_RECORD]
    return counts


def _pairs(table: TaskTable, calls: ThreadCalls, index: StreamIndex) -> list[_Found | str]:
    """Each wait's inferred pair, or why it has none."""
    n = len(calls.task)
    launched = calls.launched
    is_launch = launched >= 0
    # next launch position after each call (n: none)
    nxt = np.where(is_launch, np.arange(n), n)
    nxt = np.r_[np.minimum.accumulate(nxt[::-1])[::-1], n]
    recent = _latest_by_stream(n, np.flatnonzero(is_launch), launched[is_launch])
    out: list[_Found | str] = []
    used: dict[int, set[int]] = {}
    rec_pos = calls.record.tolist()
    for p in calls.wait.tolist():
        target_pos = int(nxt[p + 1])
        k = bisect.bisect_left(rec_pos, p) - 1
        if target_pos >= n:  # no launch after it on this thread: its current stream waits
            trailing = _trailing(calls, recent, p, k)
            if trailing is None:
                out.append("unresolved")
                continue
            target, stream, at = trailing
            record = int(calls.task[rec_pos[k]]) if k >= 0 else -1
            out.append(_edge(table, index, int(calls.task[p]), target, stream, at, record))
            continue
        target = int(launched[target_pos])
        record = -1
        earlier: tuple[tuple[int, int], ...] = ()
        if k >= 0:  # the event recorded last before the wait, on its stream
            stream, at = int(calls.record_stream[k]), rec_pos[k]
            record = int(calls.task[at])
            if stream == target and _guessed(calls, k):
                stream = _held_by_other(table, index, calls, recent, p, at, target)
            if stream == target:
                out.append("same_stream")
                continue
            earlier = _records_before(table, calls, index, k, target)
        else:  # no records: the most recently launched other stream(s)
            taken = used.setdefault(target_pos, set())
            cands = [(int(last[p]), s) for s, last in recent.items() if s != target]
            cands = [c for c in cands if c[0] >= 0 and c[1] not in taken]
            if not cands:
                out.append("unresolved")
                continue
            at, stream = max(cands)
            taken.add(stream)
        out.append(
            _edge(
                table,
                index,
                int(calls.task[p]),
                target,
                stream,
                int(calls.task[at]),
                record,
                earlier,
            )
        )
    return out


def _guessed(calls: ThreadCalls, k: int) -> bool:
    return calls.record_guessed is not None and bool(calls.record_guessed[k])


def _held_by_other(
    table: TaskTable,
    index: StreamIndex,
    calls: ThreadCalls,
    recent: dict[int, np.ndarray],
    p: int,
    at: int,
    target: int,
) -> int:
    """The stream a record guessed to be on the waiting stream `target` was on (the
    record at position `at`, the wait at `p`), or `target`. The guess is the thread's
    launch before the record, which may be a copy launched onto the waiting stream
    itself (a collective's scratch memset); it is taken to be wrong when the waiting op
    was held and the last op launched before the record on the thread's latest other
    stream ended within `GPU_GAP_MAX_NS` before it started: that stream's event held it."""
    cands = [(int(last[at]), s) for s, last in recent.items() if s != target and last[at] >= 0]
    if not cands:
        return target
    other = max(cands)[1]
    found = _edge(table, index, int(calls.task[p]), target, other, int(calls.task[at]), -1)
    if isinstance(found, str):
        return target
    start = int(table.start[found.dst])
    lag = start - table.end(found.src)
    held = start - int(ready_ns(table, np.asarray([found.dst]))[0]) > GPU_GAP_MAX_NS
    return other if held and 0 <= lag <= GPU_GAP_MAX_NS else target


def _edge(
    table: TaskTable,
    index: StreamIndex,
    wait_task: int,
    target: int,
    stream: int,
    at: int,
    record: int,
    earlier: tuple[tuple[int, int], ...] = (),
) -> _Found | str:
    """The wait's edge: from the last op of `stream` launched before the runtime call `at`
    (a record or a launch) to the first op of `target` launched after the wait."""
    src = index.last_before(stream, int(table.start[at]) + 1)
    dst = index.first_after(target, int(table.start[wait_task]))
    if src is None or dst is None or stream < 0:
        return "unresolved"
    return _Found(wait_task, target, src, dst, record, earlier)


def _trailing(
    calls: ThreadCalls, recent: dict[int, np.ndarray], p: int, k: int
) -> tuple[int, int, int] | None:
    """(waiting stream, stream waited for, task of the call it anchors on) of a wait after
    the thread's last launch, or None. Its stream is the thread's current stream, but no
    launch of the thread names it (DDP's last bucket: the autograd thread waits for the
    all-reduce and the optimizer's next kernel on that stream comes from the main thread).
    The stream waited for is the last record's (with records) or the last launch's; the
    waiting one is the latest other stream the thread launched on."""
    latest = {s: int(last[p]) for s, last in recent.items() if last[p] >= 0}
    if k >= 0:
        stream, at = int(calls.record_stream[k]), int(calls.record[k])
    elif latest:
        stream = max(latest, key=latest.__getitem__)
        at = latest[stream]
    else:
        return None
    others = {s: pos for s, pos in latest.items() if s != stream}
    if stream < 0 or not others:
        return None
    target = max(others, key=others.__getitem__)
    return target, stream, int(calls.task[at])


def _records_before(
    table: TaskTable, calls: ThreadCalls, index: StreamIndex, k: int, target: int
) -> tuple[tuple[int, int], ...]:
    """(src, record task) of the up to MAX_EARLIER records before record `k` that were
    recorded on another stream than `target`, most recent first."""
    out = []
    for j in range(k - 1, max(k - MAX_EARLIER, 0) - 1, -1):
        stream = int(calls.record_stream[j])
        if stream < 0 or stream == target:
            continue
        task = int(calls.task[calls.record[j]])
        src = index.last_before(stream, int(table.start[task]) + 1)
        if src is not None:
            out.append((src, task))
    return tuple(out)


def _earlier_event(table: TaskTable, found: _Found) -> _Found | None:
    """The wait paired with an earlier record instead, when the last one's op was still
    running as the waiting op started but the waiting op was held (started more than
    GPU_GAP_MAX_NS after it was ready) and an earlier record's op ended within
    GPU_GAP_MAX_NS before it started: the latest such one. None otherwise."""
    dst = found.dst
    start = int(table.start[dst])
    if not found.earlier or start - int(ready_ns(table, np.asarray([dst]))[0]) <= GPU_GAP_MAX_NS:
        return None
    best, best_end = None, start - GPU_GAP_MAX_NS - 1
    for src, record in found.earlier:
        end = table.end(src)
        if best_end < end <= start + GPU_SLACK_NS and table.stream[src] != found.stream:
            best, best_end = (src, record), end
    if best is None:
        return None
    return _Found(found.wait, found.stream, best[0], dst, best[1])


def _latest_by_stream(n: int, pos: np.ndarray, stream: np.ndarray) -> dict[int, np.ndarray]:
    """stream → for each position, the latest of `pos` on that stream at or before it (-1)."""
    out = {}
    for s in np.unique(stream).tolist():
        marks = np.full(n, -1, np.int64)
        mine = pos[stream == s]
        marks[mine] = mine
        out[s] = np.maximum.accumulate(marks) if n else marks
    return out
