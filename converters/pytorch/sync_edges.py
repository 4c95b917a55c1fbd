"""GPU→CPU and GPU→GPU synchronisation: edges plus the attributes to re-resolve them.

Kineto's `cuda_sync` events (recorded when the profiler enables CUDA sync events) say
which stream and which event a sync call or `cudaStreamWaitEvent` waited on; without
them a stream sync is assumed to wait for the stream its thread launched on last, and a
device sync for every stream, and an event sync (`cudaEventSynchronize`,
`hipEventSynchronize`) for the event its thread recorded last before it. The waited-for
GPU op is the last one launched on that stream before the sync (or before the
`cudaEventRecord` it names or is paired with); a stream sync also waits for the CUDA
graphs its thread launched since its last launch onto that stream (`graph_launch`:
CUPTI puts a graph's ops on streams of its own). A sync task's
duration becomes the time it ran after its GPU op finished, since the wait itself is
now an edge; the part cut off is kept (`sync_wait_ns`, and `TaskTable.waited` so the
next op's `gap_ns` counts from the call's recorded end, not from the shortened one).
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from lumos.converters.chakra import conventions as cv
from lumos.converters.pytorch.graph_launch import RecentGraphs, launch_streams
from lumos.converters.pytorch.kineto import Kind, KinetoTrace
from lumos.converters.pytorch.stream_index import StreamIndex
from lumos.converters.pytorch.tasks import TaskTable
from lumos.converters.pytorch.wait_inference import INFERRED_EVENT_BASE, ThreadCalls, infer_waits

__all__ = ["StreamIndex", "add_sync_edges"]

DEVICE_SYNC = ("cudaDeviceSynchronize", "hipDeviceSynchronize", "cudaCtxSynchronize")
STREAM_SYNC = ("cudaStreamSynchronize", "hipStreamSynchronize")
EVENT_SYNC = ("cudaEventSynchronize", "hipEventSynchronize")
STREAM_WAIT = ("cudaStreamWaitEvent", "hipStreamWaitEvent")
EVENT_RECORD = ("cudaEventRecord", "hipEventRecord", "cudaEventRecordWithFlags")


_SYNC_NAMES = frozenset(DEVICE_SYNC + STREAM_SYNC + EVENT_SYNC + STREAM_WAIT + EVENT_RECORD)
#: CUPTI's names for the per-thread default-stream builds of the same calls
#: (`--default-stream per-thread`: `cudaStreamSynchronize_ptsz`, `cudaEventRecord_ptsz`,
#: `cudaStreamWaitEvent_ptsz`; `_ptds` for the copy family); they wait as the plain call.
_PER_THREAD_SUFFIXES = ("_ptsz", "_ptds")


def api_name(name: str) -> str:
    """The runtime call `name` is, without CUPTI's per-thread default-stream suffix."""
    for suffix in _PER_THREAD_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


#: a blocking call cannot return before what it waits for ends; CPU and GPU clocks of
#: one trace agree to within this.
CLOCK_SLACK_NS = 50_000


def add_sync_edges(
    trace: KinetoTrace,
    table: TaskTable,
    n_cpu: int,
    index: StreamIndex,
    launch_of: dict[int, int],
) -> dict[str, int]:
    """Add sync/wait edges and attributes to the CPU tasks (the first `n_cpu`) of runtime calls.

    Returns how many sync and wait calls were resolved from the trace's own records
    (`recorded`), from program order (`inferred`), not at all (`unresolved`), had an
    inferred edge the timestamps contradict, which was dropped (`rejected`), or waited
    for an event recorded on the waiting stream itself (`same_stream`: no edge needed).
    """
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
    runtime = runtime[np.lexsort((runtime, table.start[runtime], table.tid[runtime]))]
    launched = launch_streams(table, index, n_cpu)  # stream each launch task launched on
    is_sync = np.array([api_name(n) in _SYNC_NAMES for n in trace.names] or [False], bool)
    stream_at = launched[runtime]
    graphs = RecentGraphs(table, index, runtime, stream_at)
    syncs = np.flatnonzero((stream_at < 0) & is_sync[trace.name[ev[runtime]]])
    before = _last_launch_stream(table.tid[runtime], stream_at)
    counts = dict.fromkeys(("recorded", "inferred", "rejected", "same_stream", "unresolved"), 0)
    pending: dict[str, list[int]] = {"wait": [], "record": [], "event": []}
    for pos in syncs.tolist():
        last = int(before[pos])
        outcome = _sync_task(
            trace, table, pos, graphs, index, launch_of, sync_of, record_info, last
        )
        if outcome in pending:
            pending[outcome].append(pos)
        elif outcome:
            counts[outcome] += 1
    if pending["wait"]:
        _infer(table, runtime, stream_at, before, pending, index, counts)
    for pos in pending["event"]:
        counts[_infer_event_sync(table, runtime, before, pending["record"], pos, index)] += 1
    return counts


def _infer_event_sync(
    table: TaskTable,
    runtime: np.ndarray,
    before: np.ndarray,
    records: list[int],
    pos: int,
    index: StreamIndex,
) -> str:
    """A `cudaEventSynchronize` the trace does not resolve (no `cuda_sync`): it waits for
    the event its thread recorded last before it, i.e. for the last GPU op launched on the
    record's stream (the one the trace names, else the one launched on before the
    record) before the record. Checked against the timestamps like every inferred wait.
    """
    task = int(runtime[pos])
    k = bisect.bisect_left(records, pos) - 1
    if k < 0 or table.tid[runtime[records[k]]] != table.tid[task]:
        return "unresolved"  # no record on this thread (recorded elsewhere, or not traced)
    record = int(runtime[records[k]])
    rec_attrs = table.attrs_of(record)
    stream = int(rec_attrs.get(cv.SYNC_STREAM, -1))
    if stream < 0:
        stream = int(before[records[k]])
    src = index.last_before(stream, int(table.start[record]) + 1) if stream >= 0 else None
    if src is None:
        if not rec_attrs:
            del table.attrs[record]
        return "unresolved"
    attrs = table.attrs_of(task)
    attrs[cv.SYNC_STREAM] = stream
    attrs[cv.SYNC_INFERRED] = True
    outcome = _wait(table, task, [src], "inferred")
    if outcome == "inferred":
        if cv.EVENT_RECORD not in rec_attrs:
            rec_attrs[cv.EVENT_RECORD] = INFERRED_EVENT_BASE + record
            rec_attrs[cv.SYNC_STREAM] = stream
        attrs[cv.SYNC_EVENT] = rec_attrs[cv.EVENT_RECORD]
    elif not rec_attrs:
        del table.attrs[record]
    return outcome


def _infer(
    table: TaskTable,
    runtime: np.ndarray,
    stream_at: np.ndarray,
    before: np.ndarray,
    pending: dict[str, list[int]],
    index: StreamIndex,
    counts: dict[str, int],
) -> None:
    """Pair each thread's unresolved waits with its records or launches (`wait_inference`)."""
    tids = table.tid[runtime]
    cuts = np.flatnonzero(np.diff(tids)) + 1
    lo = np.r_[0, cuts]
    hi = np.r_[cuts, len(tids)]
    waits = np.asarray(pending["wait"], np.int64)
    records = np.asarray(pending["record"], np.int64)
    for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
        mine = waits[(waits >= a) & (waits < b)]
        if not len(mine):
            continue
        recs = records[(records >= a) & (records < b)]
        known = [table.attrs.get(int(t), {}).get(cv.SYNC_STREAM, -1) for t in runtime[recs]]
        calls = ThreadCalls(
            runtime[a:b],
            stream_at[a:b],
            mine - a,
            recs - a,
            np.where(np.asarray(known, np.int64) >= 0, known, before[recs]),
            np.asarray(known, np.int64) < 0,
        )
        for key, value in infer_waits(table, calls, index).items():
            counts[key] += value


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
    pos: int,
    graphs: RecentGraphs,
    index: StreamIndex,
    launch_of: dict[int, int],
    sync_of: dict[int, int],
    record_info: dict[int, tuple[int, int]],
    last_stream: int,
) -> str | None:
    """Resolve call `pos` (of `graphs.runtime`); returns its outcome, or "wait"/"record"
    to pair by program order."""
    task = int(graphs.runtime[pos])
    row = int(table.ev[task])
    name, corr = api_name(trace.name_of(row)), int(trace.corr[row])
    sync = sync_of.get(corr)
    args: dict[str, Any] = (trace.args.get(sync) or {}) if sync is not None else {}
    start = int(table.start[task])
    attrs = table.attrs_of(task)
    outcome: str | None = None
    if name in DEVICE_SYNC:
        attrs[cv.SYNC_KIND] = "device"
        last_ops = [index.last_before(s, start) for s in sorted(index.ops)]
        outcome = _wait(table, task, [w for w in last_ops if w is not None], "recorded")
    elif name in STREAM_SYNC:
        known = "stream" in args
        stream = int(args["stream"]) if known else last_stream
        attrs[cv.SYNC_KIND] = "stream"
        attrs[cv.SYNC_STREAM] = stream
        if not known:
            attrs[cv.SYNC_INFERRED] = True
        last = index.last_before(stream, start) if stream >= 0 else None
        waited = [] if last is None else [last]
        if stream >= 0:  # graphs launched into it since its last launch
            until = table.end(task) + CLOCK_SLACK_NS
            waited += [g for g in graphs.sinks(pos, stream, until) if g != last]
        outcome = _wait(table, task, waited, "recorded" if known else "inferred")
        if stream < 0:
            outcome = "unresolved"
    elif name in EVENT_SYNC:
        attrs[cv.SYNC_KIND] = "event"
        if "wait_on_cuda_event_record_corr_id" not in args:
            return "event"  # no cuda_sync: pair with its record by program order
        src = _recorded(table, args, launch_of, index)
        if "wait_on_cuda_event_id" in args:
            attrs[cv.SYNC_EVENT] = int(args["wait_on_cuda_event_id"])
            attrs[cv.SYNC_STREAM] = int(args.get("wait_on_stream", -1))
        outcome = _wait(table, task, [src] if src is not None else [], "recorded")
    elif name in STREAM_WAIT:
        attrs[cv.SYNC_KIND] = "stream_wait_event"
        outcome = "wait"
        if "stream" in args:  # named by the trace (nothing to order if its stream was idle)
            target = int(args["stream"])
            attrs[cv.SYNC_STREAM] = target
            attrs[cv.SYNC_EVENT] = int(args.get("wait_on_cuda_event_id", -1))
            src = _recorded(table, args, launch_of, index)
            dst = index.first_after(target, start)
            if src is not None and dst is not None and src != dst:
                table.add_data(dst, src)
            outcome = "recorded"
    elif name in EVENT_RECORD:
        outcome = "record"
        if corr in record_info:
            event_id, stream = record_info[corr]
            attrs[cv.EVENT_RECORD] = event_id
            attrs[cv.SYNC_STREAM] = stream
    if not attrs:
        del table.attrs[task]
    return outcome


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


def _wait(table: TaskTable, task: int, waited: list[int], outcome: str) -> str:
    """Make `task` wait for the GPU ops `waited` and keep only the time it ran after them.

    An inferred wait whose op ended, as recorded, after the call had returned is dropped
    (`rejected`).
    """
    if not waited:  # no GPU work before it in the step: nothing to wait for
        return outcome
    if (
        outcome == "inferred"
        and max(table.end(w) for w in waited) > table.end(task) + CLOCK_SLACK_NS
    ):
        return "rejected"
    for dep in waited:
        table.add_data(task, dep)
    done = max(table.end(w) for w in waited)
    end = table.end(task)
    dur = max(0, end - max(int(table.start[task]), done)) if done < end else 0
    cut = int(table.dur[task]) - dur
    if cut > 0:
        table.dur[task] = dur
        table.waited[task] = cut
        table.attrs_of(task)[cv.SYNC_WAIT_NS] = cut
    return outcome
