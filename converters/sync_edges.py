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

from lumos.converters import conventions as cv
from lumos.converters.kineto import KEvent, Kind
from lumos.converters.tasks import Task

DEVICE_SYNC = ("cudaDeviceSynchronize", "hipDeviceSynchronize", "cudaCtxSynchronize")
STREAM_SYNC = ("cudaStreamSynchronize", "hipStreamSynchronize")
EVENT_SYNC = ("cudaEventSynchronize", "hipEventSynchronize")
STREAM_WAIT = ("cudaStreamWaitEvent", "hipStreamWaitEvent")
EVENT_RECORD = ("cudaEventRecord", "hipEventRecord", "cudaEventRecordWithFlags")


class _Streams:
    """GPU tasks of each stream, searchable by launch time."""

    def __init__(self, streams: dict[int, list[Task]]) -> None:
        self.ops = streams
        self.launch = {s: [t.attrs["_launch_ts"] for t in ops] for s, ops in streams.items()}

    def last_before(self, stream: int, ts: int) -> Task | None:
        times = self.launch.get(stream)
        if not times:
            return None
        k = bisect.bisect_left(times, ts) - 1
        return self.ops[stream][k] if k >= 0 else None

    def first_after(self, stream: int, ts: int) -> Task | None:
        times = self.launch.get(stream)
        if not times:
            return None
        k = bisect.bisect_right(times, ts)
        return self.ops[stream][k] if k < len(times) else None


def add_sync_edges(
    events: list[KEvent],
    cpu: list[Task],
    streams: dict[int, list[Task]],
    launch_of: dict[int, Task],
) -> None:
    """Add sync/wait edges and attributes to the CPU tasks of runtime calls."""
    index = _Streams(streams)
    sync_of = {e.corr: e for e in events if e.kind is Kind.SYNC and e.corr >= 0}
    record_info: dict[int, tuple[int, int]] = {}  # record corr → (event id, stream)
    for sync_ev in sync_of.values():
        sync_args = sync_ev.args or {}
        rec = sync_args.get("wait_on_cuda_event_record_corr_id")
        if rec is not None:
            record_info[int(rec)] = (
                int(sync_args.get("wait_on_cuda_event_id", -1)),
                int(sync_args.get("wait_on_stream", -1)),
            )
    last_stream: dict[int, int] = {}  # thread → stream it launched on last
    gpu_of_launch = {id(t.data[0]): t for ops in streams.values() for t in ops if t.data}
    for task in sorted(cpu, key=lambda t: t.start):
        ev = task.ev
        if ev is None or ev.kind is not Kind.RUNTIME or not task.head:
            continue
        launched = gpu_of_launch.get(id(task))
        if launched is not None:
            last_stream[task.tid] = launched.stream
            continue
        name = ev.name
        sync = sync_of.get(ev.corr)
        args: dict[str, Any] = (sync.args or {}) if sync is not None else {}
        if name in DEVICE_SYNC:
            task.attrs[cv.SYNC_KIND] = "device"
            waited = [index.last_before(s, task.start) for s in sorted(streams)]
            _wait(task, [w for w in waited if w is not None])
        elif name in STREAM_SYNC:
            stream = int(args.get("stream", last_stream.get(task.tid, -1)))
            task.attrs[cv.SYNC_KIND] = "stream"
            task.attrs[cv.SYNC_STREAM] = stream
            _wait(task, [w for w in [index.last_before(stream, task.start)] if w])
        elif name in EVENT_SYNC:
            task.attrs[cv.SYNC_KIND] = "event"
            src = _recorded(args, launch_of, index)
            if "wait_on_cuda_event_id" in args:
                task.attrs[cv.SYNC_EVENT] = int(args["wait_on_cuda_event_id"])
                task.attrs[cv.SYNC_STREAM] = int(args.get("wait_on_stream", -1))
            _wait(task, [src] if src else [])
        elif name in STREAM_WAIT:
            task.attrs[cv.SYNC_KIND] = "stream_wait_event"
            if "stream" in args:
                target = int(args["stream"])
                task.attrs[cv.SYNC_STREAM] = target
                task.attrs[cv.SYNC_EVENT] = int(args.get("wait_on_cuda_event_id", -1))
                src = _recorded(args, launch_of, index)
                dst = index.first_after(target, task.start)
                if src is not None and dst is not None and src is not dst:
                    dst.data.append(src)
        elif name in EVENT_RECORD and ev.corr in record_info:
            event_id, stream = record_info[ev.corr]
            task.attrs[cv.EVENT_RECORD] = event_id
            task.attrs[cv.SYNC_STREAM] = stream


def _recorded(args: dict[str, Any], launch_of: dict[int, Task], index: _Streams) -> Task | None:
    """The last GPU op on the recorded stream before the cudaEventRecord named in args."""
    rec = args.get("wait_on_cuda_event_record_corr_id")
    stream = args.get("wait_on_stream")
    if rec is None or stream is None:
        return None
    record = launch_of.get(int(rec))
    if record is None:
        return None
    return index.last_before(int(stream), record.start)


def _wait(task: Task, waited: list[Task]) -> None:
    if not waited:
        return
    task.data.extend(waited)
    done = max(w.end for w in waited)
    task.dur = max(0, task.end - max(task.start, done)) if done < task.end else 0
