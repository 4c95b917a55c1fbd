"""Building one rank's execution graph from its Kineto trace (and linked host-ET ops).

Processors are CPU threads and GPU streams. The four dependency classes come from:
thread order (a gloo send first, before the `c10d::send` that issued it: `sends_first`)
and cross-thread waits (`_thread_edges`); launch → GPU op by `correlation` (a CUDA
graph's ops share one: `graph_launch` adds the joins the trace omits); stream order;
synchronisation and event record/wait edges (`sync_edges`; where the trace does not name
what a wait waits for, paired by program order: `wait_inference`). Collectives and
point-to-point ops become COMM tasks (`comm_tasks`). Only the chosen step's host
events and the GPU work they launch are kept. Bulk work is done on numpy columns; Python
loops run only over a thread's events (flattening) and the rare sync and comm tasks.
"""

from __future__ import annotations

import numpy as np

from lumos.converters.pytorch.comm import SEND, is_comm_kernel, is_gloo_op, kind_of
from lumos.converters.pytorch.comm_tasks import HOST_SEND_OPS, CommContext, annotate_comm
from lumos.converters.pytorch.copy_waits import mark_copy_waits
from lumos.converters.pytorch.duplicate_ops import first_records
from lumos.converters.pytorch.flatten import Segments, flatten_thread, sends_first, thread_order
from lumos.converters.pytorch.graph_launch import add_graph_edges
from lumos.converters.pytorch.kineto import Kind, KinetoTrace
from lumos.converters.pytorch.orphan_ops import (
    orphan_launch_times,
    orphan_rows,
    pair_with_bare_launches,
    stand_in_launches,
)
from lumos.converters.pytorch.steps import StepWindow, step_name_mask
from lumos.converters.pytorch.stream_index import StreamIndex
from lumos.converters.pytorch.sync_edges import add_sync_edges
from lumos.converters.pytorch.tasks import TaskKind, TaskTable

#: a thread resuming after at least this long idle, right after another thread's task
#: ended, is taken to have waited for it.
WAIT_MIN_GAP_NS = 10_000


def _name_flags(trace: KinetoTrace, test: object) -> np.ndarray:
    return np.array([test(n) for n in trace.names] or [False], bool)  # type: ignore[operator]


def cpu_segments(trace: KinetoTrace, window: StepWindow) -> Segments:
    """The step's host events of the window's process, flattened thread by thread."""
    kind, ts = trace.kind, trace.ts
    is_step = step_name_mask(trace)[trace.name] & (kind == Kind.ANNOTATION)
    on_cpu = (kind == Kind.CPU_OP) | (kind == Kind.ANNOTATION) | (kind == Kind.RUNTIME)
    pick = on_cpu & (trace.pid == window.pid) & (ts >= window.start) & (ts < window.end)
    rows = np.flatnonzero(pick & ~is_step)
    gloo = _name_flags(trace, is_gloo_op)
    gpu = kind == Kind.GPU
    comm_corr = trace.corr[gpu][_name_flags(trace, is_comm_kernel)[trace.name[gpu]]]
    runtime = kind == Kind.RUNTIME
    keep_chain = gloo[trace.name] | (runtime & np.isin(trace.corr, comm_corr[comm_corr >= 0]))
    if (comm_corr < 0).any() or not np.isin(comm_corr, trace.corr[runtime]).all():
        bare = runtime & _name_flags(trace, lambda n: "Launch" in n)[trace.name]
        keep_chain |= bare & ~np.isin(trace.corr, trace.corr[gpu])  # may launch an orphan
    gloo_send = _name_flags(trace, lambda n: is_gloo_op(n) and kind_of(n) == SEND)
    host_send = _name_flags(trace, lambda n: n in HOST_SEND_OPS)
    segs = Segments()
    tids = trace.tid[rows]
    for tid in np.unique(tids).tolist():
        mine = rows[tids == tid]
        lo = len(segs.ev)
        flatten_thread(trace, thread_order(trace, mine), gloo, keep_chain, segs)
        if gloo_send[trace.name[mine]].any():
            sends_first(trace, segs, lo, gloo_send, host_send)
    return segs


def build_tasks(
    trace: KinetoTrace,
    window: StepWindow,
    host_row: np.ndarray | None,
    ctx: CommContext,
    segs: Segments | None = None,
) -> TaskTable:
    """Every task of the step, with all dependencies as task indices.

    `segs` are the step's `cpu_segments`, when already computed (e.g. by a worker).
    """
    kind = trace.kind
    host_row = host_row if host_row is not None else np.full(len(trace), -1, np.int64)
    gloo = _name_flags(trace, is_gloo_op)
    segs = segs if segs is not None else cpu_segments(trace, window)
    table = TaskTable(trace.names)
    ev = np.asarray(segs.ev, np.int64)
    start = np.asarray(segs.start, np.int64)
    cpu = table.append(
        kind=np.zeros(len(ev), np.int8),
        name=trace.name[ev],
        start=start,
        dur=np.asarray(segs.end, np.int64) - start,
        tid=trace.tid[ev],
        ev=ev,
        host=host_row[ev],
        head=segs.head,
        ctrl=_chain_prev(trace.tid[ev]),
    )
    for seg, chain in segs.chain.items():
        if gloo[trace.name[ev[seg]]]:
            table.attrs_of(seg)["_enclosing"] = chain
    is_launch = (kind[ev] == Kind.RUNTIME) & (trace.corr[ev] >= 0)
    launches = cpu[is_launch]
    launch_of = dict(zip(trace.corr[ev[launches]].tolist(), launches.tolist(), strict=True))
    streams, launch_ts = _gpu_tasks(trace, table, launch_of, segs.chain, window)
    index = StreamIndex(streams, launch_ts)
    table.counts["graphs"] = add_graph_edges(table, index)
    table.counts["syncs"] = add_sync_edges(trace, table, len(cpu), index, launch_of)
    mark_copy_waits(table)
    annotate_comm(table, trace, host_row, ctx)
    is_ann = (kind[ev] == Kind.ANNOTATION) & ~gloo[trace.name[ev]]
    _thread_edges(table, len(cpu), is_ann)
    for attrs in table.attrs.values():
        attrs.pop("_enclosing", None)
    return table


def _chain_prev(proc: np.ndarray) -> np.ndarray:
    """For tasks grouped by processor in order: the index of the one before, or -1."""
    prev = np.arange(-1, len(proc) - 1, dtype=np.int64)
    if len(proc):
        prev[0] = -1
        prev[1:][proc[1:] != proc[:-1]] = -1
    return prev


def _gpu_tasks(
    trace: KinetoTrace,
    table: TaskTable,
    launch_of: dict[int, int],
    chains: dict[int, tuple[int, ...]],
    window: StepWindow,
) -> tuple[dict[int, list[int]], dict[int, int]]:
    """GPU tasks for kernels whose launch is in the step, and for the step's kernels whose
    launch the trace lacks (`orphan_ops`: each depends on a stand-in CPU task instead).

    Returns stream → its tasks in order (streams in order of first appearance) and each
    GPU task's launch time (an orphan's: its stand-in's end).
    """
    gpu = np.flatnonzero(trace.kind == Kind.GPU)
    corr = trace.corr[gpu].tolist()
    launch = np.array([launch_of.get(c, -1) for c in corr], np.int64)
    gpu, launch = gpu[launch >= 0], launch[launch >= 0]
    n_cpu = len(table)
    orphans, paired, anchor = _orphans(trace, table, launch_of, window, gpu)
    gpu = np.r_[gpu, orphans].astype(np.int64)
    launch = np.r_[launch, paired].astype(np.int64)
    anchor = np.r_[np.full(len(gpu) - len(orphans), -1, np.int64), anchor]
    cpu_end = table.start + table.dur
    launch_ts = np.where(
        launch >= 0, table.start[np.maximum(launch, 0)], cpu_end[np.maximum(anchor, 0)]
    )
    launch_ts[(launch < 0) & (anchor < 0)] = trace.ts[gpu[(launch < 0) & (anchor < 0)]]
    first = first_records(trace, gpu)
    table.counts["gpu_records"] = {
        "without_launch": len(orphans),
        "without_stand_in": int(((anchor < 0) & (launch < 0)).sum()),
        "paired_with_bare_launch": int((paired >= 0).sum()),
        "duplicates": len(gpu) - len(first),
        **_before_launch(trace.ts[gpu] - launch_ts),
    }
    gpu, launch, launch_ts, anchor = (a[first] for a in (gpu, launch, launch_ts, anchor))
    gpu_file = gpu
    comm = _name_flags(trace, is_comm_kernel)[trace.name[gpu]]
    stream = trace.tid[gpu]
    order = np.lexsort((np.arange(len(gpu)), launch_ts, trace.ts[gpu], stream))
    gpu, launch, comm, stream, launch_ts, anchor = (
        a[order] for a in (gpu, launch, comm, stream, launch_ts, anchor)
    )
    launch_ts = orphan_launch_times(launch_ts, launch < 0, stream)
    base = len(table)
    dur = _clip_overlaps(trace.ts[gpu], trace.dur[gpu], stream)
    table.counts["gpu_records"] |= {
        "overlapping": int((dur < trace.dur[gpu]).sum()),
        "overlap_max_ns": int((trace.dur[gpu] - dur).max(initial=0)),
    }
    tasks = table.append(
        kind=np.where(comm, TaskKind.COLL, TaskKind.GPU),
        name=trace.name[gpu],
        start=trace.ts[gpu],
        dur=dur,
        stream=stream,
        device=trace.pid[gpu],
        ev=gpu,
        host=np.where(comm & (launch >= 0), table.host[np.maximum(launch, 0)], -1),
        data1=launch,
        ctrl=np.where(_chain_prev(stream) >= 0, _chain_prev(stream) + base, -1),
    )
    for task in tasks[comm].tolist():
        table.attrs_of(task)["_enclosing"] = chains.get(int(table.data1[task]), ())
    for task, dep in zip(tasks[anchor >= 0].tolist(), anchor[anchor >= 0].tolist(), strict=True):
        if dep < n_cpu:
            table.add_data(task, dep)
    file_stream = trace.tid[gpu_file]
    _, first = np.unique(file_stream, return_index=True)
    streams: dict[int, list[int]] = {int(s): [] for s in file_stream[np.sort(first)].tolist()}
    for task, s in zip(tasks.tolist(), stream.tolist(), strict=True):
        streams[s].append(task)
    return streams, dict(zip(tasks.tolist(), launch_ts.tolist(), strict=True))


def _clip_overlaps(start: np.ndarray, dur: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """Durations of GPU ops sorted by stream and start, each cut to end where the next op
    of its stream starts. A stream runs one op at a time, yet CUPTI records queued ops
    overlapping by a few µs (clock skew between its start and end stamps); replayed in
    order, every overlap would be added to the stream's time once more."""
    out = dur.copy()
    if len(start) > 1:
        same = stream[1:] == stream[:-1]
        room = np.maximum(start[1:] - start[:-1], 0)
        out[:-1] = np.where(same & (dur[:-1] > room), room, dur[:-1])
    return out


def _before_launch(lead: np.ndarray) -> dict[str, int]:
    """GPU ops that started, as recorded, before their launch call started (`lead` < 0):
    the GPU and CPU clocks disagree (or the record is corrupt, pytorch/pytorch#192021).
    Replay cannot start an op before its call: each runs that much late."""
    early = lead[lead < 0]
    return {
        "before_launch": len(early),
        "before_launch_max_ns": int(-early.min()) if len(early) else 0,
    }


def _orphans(
    trace: KinetoTrace,
    table: TaskTable,
    launch_of: dict[int, int],
    window: StepWindow,
    linked: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The step's GPU ops without launch call (`orphan_ops`): their Kineto rows, the bare
    launch each NCCL kernel pairs with (-1: none), and the stand-in CPU task of the
    others (-1: none)."""
    orphans = orphan_rows(trace, window, linked)
    paired = _bare_launches(trace, table, launch_of, orphans)
    end = table.start + table.dur
    stand_in = stand_in_launches(
        table.name, table.start, end, trace.name[orphans], trace.ts[orphans]
    )
    return orphans, paired, np.where(paired >= 0, -1, stand_in)


def _bare_launches(
    trace: KinetoTrace, table: TaskTable, launch_of: dict[int, int], orphans: np.ndarray
) -> np.ndarray:
    """Per orphan op: the step's kernel launch call without GPU op it pairs with (NCCL
    kernels only, `pair_with_bare_launches`), or -1."""
    out = np.full(len(orphans), -1, np.int64)
    comm = np.flatnonzero(_name_flags(trace, is_comm_kernel)[trace.name[orphans]])
    if not len(comm):
        return out
    has_op = set(trace.corr[trace.kind == Kind.GPU].tolist())
    bare = sorted(
        (int(table.start[t]), t)
        for c, t in launch_of.items()
        if c not in has_op and "Launch" in table.name_of(t) and "Graph" not in table.name_of(t)
    )
    if not bare:
        return out
    starts = np.array([b[0] for b in bare], np.int64)
    pick = pair_with_bare_launches(trace.ts[orphans[comm]], starts)
    out[comm[pick >= 0]] = [bare[k][1] for k in pick[pick >= 0].tolist()]
    return out


def _thread_edges(table: TaskTable, n_cpu: int, idle: np.ndarray) -> None:
    """Cross-thread waits: a thread resuming right after another thread's task ended.

    A task that starts a thread's chain, or follows at least WAIT_MIN_GAP_NS of untraced
    time, waits for the task of another thread that ended last before it started, if that
    end falls in the second half of the untraced time. Untraced time is the gap before
    the task, and also the `idle` tasks right before it (segments of user annotations:
    they record no work of their own) back to the thread's last traced work: a
    `record_function("## backward ##")` around `loss.backward()` covers the main thread
    while it is blocked on the autograd thread, and the op after it waits for that
    thread's last task (without the edge the two threads drift apart over a long replay
    until one's launches overtake the other's on a shared stream). A sync call ends at
    its recorded end: the wait cut from its duration (`TaskTable.waited`) is still time
    the thread was busy, not a moment another thread could have resumed after.
    """
    tids = table.tid[:n_cpu]
    threads = np.unique(tids)
    if len(threads) < 2:
        return
    start = table.start[:n_cpu]
    end = start + table.dur[:n_cpu]
    for task, cut in table.waited.items():  # a sync ended at its recorded end, wait and all
        if task < n_cpu:
            end[task] += cut
    prev = table.ctrl[:n_cpu]
    lo = np.where(prev >= 0, end[np.maximum(prev, 0)], 0)
    after_idle = (prev >= 0) & ~idle & idle[np.maximum(prev, 0)]
    if after_idle.any():
        lo[after_idle] = _last_traced_end(prev, idle, start, end)[after_idle]
    cand = np.flatnonzero((prev < 0) | (start - lo >= WAIT_MIN_GAP_NS))
    if not len(cand):
        return
    order = np.lexsort((_position(tids), tids, end))
    found = np.full(len(cand), -1, np.int64)
    for tid in threads.tolist():
        mine = tids[cand] == tid
        others = order[tids[order] != tid]
        k = np.searchsorted(end[others], start[cand[mine]], side="right") - 1
        found[mine] = np.where(k >= 0, others[np.maximum(k, 0)], -1)
    has_prev = prev[cand] >= 0
    low = lo[cand]
    ok = (found >= 0) & (~has_prev | (end[np.maximum(found, 0)] >= low + (start[cand] - low) // 2))
    for task, dep in zip(cand[ok].tolist(), found[ok].tolist(), strict=True):
        table.add_data(task, dep)


def _last_traced_end(
    prev: np.ndarray, idle: np.ndarray, start: np.ndarray, end: np.ndarray
) -> np.ndarray:
    """Per task: the end of the last non-idle task before it on its thread, else the start
    of the thread's first task (tasks are grouped by thread in chain order)."""
    idx = np.arange(len(prev))
    first = np.maximum.accumulate(np.where(prev < 0, idx, 0))
    last = np.maximum.accumulate(np.where(idle, -1, idx))
    last = np.r_[-1, last[:-1]]
    return np.where(last >= first, end[np.maximum(last, 0)], start[first])


def _position(tids: np.ndarray) -> np.ndarray:
    """Each task's index within its thread's chain (tasks are grouped by thread)."""
    out = np.arange(len(tids))
    if len(tids):
        starts = np.flatnonzero(np.r_[True, tids[1:] != tids[:-1]])
        out -= np.repeat(starts, np.diff(np.r_[starts, len(tids)]))
    return out
