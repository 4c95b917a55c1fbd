"""GPU→CPU and GPU→GPU synchronisation: edges plus the attributes to re-resolve them.

Kineto's `cuda_sync` events (recorded when the profiler enables CUDA sync events) say
which stream and which event a sync call or `cudaStreamWaitEvent` waited on; without
them a stream sync is assumed to wait for the stream its thread launched on last, and a
device sync for every stream. The waited-for GPU op is the last one launched on that
stream before the sync (or before the `cudaEventRecord` it names). A sync task's
duration becomes the time it ran after its GPU op finished, since the wait itself is
now an edge.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from lumos.converters.chakra import conventions as cv
from lumos.converters.pytorch.kineto import Kind, KinetoTrace
from lumos.converters.pytorch.tasks import TaskTable

DEVICE_SYNC = ("cudaDeviceSynchronize", "hipDeviceSynchronize", "cudaCtxSynchronize")
STREAM_SYNC = ("cudaStreamSynchronize", "hipStreamSynchronize")
EVENT_SYNC = ("cudaEventSynchronize", "hipEventSynchronize")
STREAM_WAIT = ("cudaStreamWaitEvent", "hipStreamWaitEvent")
EVENT_RECORD = ("cudaEventRecord", "hipEventRecord", "cudaEventRecordWithFlags")


class StreamIndex:
    """GPU tasks of each stream (in stream order), searchable by launch time."""

    def __init__(self, streams: dict[int, list[int]], launch_ts: dict[int, int]) -> None:
        self.ops = streams
        self.launch = {s: [launch_ts[t] for t in ops] for s, ops in streams.items()}

    def last_before(self, stream: int, ts: int) -> int | None:
        times = self.launch.get(stream)
        if not times:
            return None
        k = bisect.bisect_left(times, ts) - 1
        return self.ops[stream][k] if k >= 0 else None

    def first_after(self, stream: int, ts: int) -> int | None:
        times = self.launch.get(stream)
        if not times:
            return None
        k = bisect.bisect_right(times, ts)
        return self.ops[stream][k] if k < len(times) else None


_SYNC_NAMES = frozenset(DEVICE_SYNC + STREAM_SYNC + EVENT_SYNC + STREAM_WAIT + EVENT_RECORD)


def add_sync_edges(
    trace: KinetoTrace,
    table: TaskTable,
    n_cpu: int,
    index: StreamIndex,
    launch_of: dict[int, int],
) -> None:
    """Add sync/wait edges and attributes to the CPU tasks (the first `n_cpu`) of runtime calls."""
    sync_rows = np.flatnonzero((trace.kind == Kind.SYNC) & (trace.corr >= 0))
    sync_of = dict(zip(trace.corr[sync_rows].tolist(), sync_rows.tolist(), strict=True))
    record_info: dict[int, tuple[int, int]] = {}  # record corr → (event id, stream)
    for row in sync_of.values():
        sync_args = trace.args.get(row) or {}
        rec = sync_args.get("wait_on_cuda_event_record_corr_id")
        if rec is not None:
            record_info[int(rec)] = (
                int(sync_args.get("wait_on_cuda_event_id", -1)),
                int(sync_args.get("wait_on_stream", -1)),
            )
    ev = table.ev[:n_cpu]
    runtime = np.flatnonzero((trace.kind[ev] == Kind.RUNTIME) & table.head[:n_cpu])
    runtime = runtime[np.argsort(table.start[runtime], kind="stable")]
    launched = np.full(n_cpu, -1, np.int64)  # stream each launch task launched on
    for ops in index.ops.values():
        launched[table.data1[ops]] = table.stream[ops]
    is_sync = np.array([n in _SYNC_NAMES for n in trace.names] or [False], bool)
    stream_at = launched[runtime]
    syncs = np.flatnonzero((stream_at < 0) & is_sync[trace.name[ev[runtime]]])
    before = _last_launch_stream(table.tid[runtime], stream_at)
    for pos in syncs.tolist():
        task = int(runtime[pos])
        last = int(before[pos])
        _sync_task(trace, table, task, index, launch_of, sync_of, record_info, last)


def _last_launch_stream(tids: np.ndarray, stream_at: np.ndarray) -> np.ndarray:
    """For each position: the stream of the latest launch before it on the same thread."""
    out = np.full(len(tids), -1, np.int64)
    for tid in np.unique(tids).tolist():
        rows = np.flatnonzero(tids == tid)
        streams = stream_at[rows]
        has = np.where(streams >= 0, np.arange(len(rows)), -1)
        latest = np.maximum.accumulate(has)
        shifted = np.r_[-1, latest[:-1]]
        out[rows] = np.where(shifted >= 0, streams[np.maximum(shifted, 0)], -1)
    return out


def _sync_task(
    trace: KinetoTrace,
    table: TaskTable,
    task: int,
    index: StreamIndex,
    launch_of: dict[int, int],
    sync_of: dict[int, int],
    record_info: dict[int, tuple[int, int]],
    last_stream: int,
) -> None:
    row = int(table.ev[task])
    name, corr = trace.name_of(row), int(trace.corr[row])
    sync = sync_of.get(corr)
    args: dict[str, Any] = (trace.args.get(sync) or {}) if sync is not None else {}
    start = int(table.start[task])
    attrs = table.attrs_of(task)
    if name in DEVICE_SYNC:
        attrs[cv.SYNC_KIND] = "device"
        waited = [index.last_before(s, start) for s in sorted(index.ops)]
        _wait(table, task, [w for w in waited if w is not None])
    elif name in STREAM_SYNC:
        stream = int(args.get("stream", last_stream))
        attrs[cv.SYNC_KIND] = "stream"
        attrs[cv.SYNC_STREAM] = stream
        last = index.last_before(stream, start)
        _wait(table, task, [last] if last is not None else [])
    elif name in EVENT_SYNC:
        attrs[cv.SYNC_KIND] = "event"
        src = _recorded(table, args, launch_of, index)
        if "wait_on_cuda_event_id" in args:
            attrs[cv.SYNC_EVENT] = int(args["wait_on_cuda_event_id"])
            attrs[cv.SYNC_STREAM] = int(args.get("wait_on_stream", -1))
        _wait(table, task, [src] if src is not None else [])
    elif name in STREAM_WAIT:
        attrs[cv.SYNC_KIND] = "stream_wait_event"
        if "stream" in args:
            target = int(args["stream"])
            attrs[cv.SYNC_STREAM] = target
            attrs[cv.SYNC_EVENT] = int(args.get("wait_on_cuda_event_id", -1))
            src = _recorded(table, args, launch_of, index)
            dst = index.first_after(target, start)
            if src is not None and dst is not None and src != dst:
                table.add_data(dst, src)
    elif name in EVENT_RECORD and corr in record_info:
        event_id, stream = record_info[corr]
        attrs[cv.EVENT_RECORD] = event_id
        attrs[cv.SYNC_STREAM] = stream
    if not attrs:
        del table.attrs[task]


def _recorded(
    table: TaskTable, args: dict[str, Any], launch_of: dict[int, int], index: StreamIndex
) -> int | None:
    """The last GPU op on the recorded stream before the cudaEventRecord named in args."""
    rec = args.get("wait_on_cuda_event_record_corr_id")
    stream = args.get("wait_on_stream")
    if rec is None or stream is None:
        return None
    record = launch_of.get(int(rec))
    if record is None:
        return None
    return index.last_before(int(stream), int(table.start[record]))


def _wait(table: TaskTable, task: int, waited: list[int]) -> None:
    if not waited:
        return
    for dep in waited:
        table.add_data(task, dep)
    done = max(table.end(w) for w in waited)
    end = table.end(task)
    table.dur[task] = max(0, end - max(int(table.start[task]), done)) if done < end else 0
