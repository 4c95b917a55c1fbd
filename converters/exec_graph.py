"""Building one rank's execution graph from its Kineto trace (and linked host-ET ops).

Processors are CPU threads and GPU streams. The four dependency classes come from:
thread order and cross-thread waits (`_thread_edges`); launch → GPU op by `correlation`;
stream order; synchronisation and event record/wait edges (`sync_edges`). Collectives
and point-to-point ops become COMM tasks (`comm_tasks`). Only the chosen step's host
events and the GPU work they launch are kept.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict

from lumos.converters.comm import is_comm_kernel, is_gloo_op
from lumos.converters.comm_tasks import annotate_comm
from lumos.converters.flatten import Segment, flatten_thread, thread_order_key
from lumos.converters.host_et import HostOp
from lumos.converters.kineto import KEvent, Kind, KinetoTrace
from lumos.converters.steps import StepWindow, is_step
from lumos.converters.sync_edges import add_sync_edges
from lumos.converters.tasks import Task, TaskKind

#: a thread resuming after at least this long idle, right after another thread's task
#: ended, is taken to have waited for it.
WAIT_MIN_GAP_NS = 10_000


def build_tasks(
    trace: KinetoTrace,
    window: StepWindow,
    host_of: dict[int, HostOp],
    rank: int,
    world_size: int,
    groups: dict[str, tuple[int, ...]],
) -> list[Task]:
    """Every task of the step, with all dependencies as object references."""
    events = trace.events
    host_by_ev = {id(events[i]): op for i, op in host_of.items()}
    threads: dict[int, list[KEvent]] = defaultdict(list)
    for ev in events:
        if (
            ev.kind in (Kind.CPU_OP, Kind.ANNOTATION, Kind.RUNTIME)
            and ev.pid == window.pid
            and window.start <= ev.ts < window.end
            and not is_step(ev)
        ):
            threads[ev.tid].append(ev)
    tasks: list[Task] = []
    launch_of: dict[int, Task] = {}  # correlation → launch task
    enclosing: dict[int, tuple[KEvent, ...]] = {}  # id(launch task) → enclosing events
    per_thread: dict[int, list[Task]] = {}
    for tid in sorted(threads):
        evs = threads[tid]
        evs.sort(key=thread_order_key)
        chain: list[Task] = []
        for seg in flatten_thread(evs, lambda e: is_gloo_op(e.name)):
            task = _cpu_task(seg, tid, host_by_ev)
            if is_gloo_op(seg.ev.name):
                task.attrs["_enclosing"] = seg.enclosing
            if seg.ev.kind is Kind.RUNTIME and seg.ev.corr >= 0:
                launch_of[seg.ev.corr] = task
                enclosing[id(task)] = seg.enclosing
            if chain:
                task.ctrl.append(chain[-1])
            chain.append(task)
        per_thread[tid] = chain
        tasks += chain
    streams: dict[int, list[Task]] = defaultdict(list)
    for ev in events:
        if ev.kind is Kind.GPU and ev.corr in launch_of:
            launch = launch_of[ev.corr]
            kind = TaskKind.COLL if is_comm_kernel(ev.name) else TaskKind.GPU
            task = Task(kind, ev.name, ev.ts, ev.dur, stream=ev.tid, device=ev.pid, ev=ev)
            task.host = launch.host if kind is TaskKind.COLL else None
            task.data.append(launch)
            task.attrs["_launch_ts"] = launch.start
            task.attrs["_enclosing"] = enclosing.get(id(launch), ())
            streams[ev.tid].append(task)
    gpu: list[Task] = []
    for stream in sorted(streams):
        ops = streams[stream]
        ops.sort(key=lambda t: (t.start, t.attrs["_launch_ts"]))
        for prev, task in itertools.pairwise(ops):
            task.ctrl.append(prev)
        gpu += ops
    add_sync_edges(events, tasks, streams, launch_of)
    annotate_comm(tasks + gpu, host_by_ev, rank, world_size, groups)
    _thread_edges(per_thread)
    for task in gpu:
        task.attrs.pop("_launch_ts", None)
        task.attrs.pop("_enclosing", None)
    return tasks + gpu


def _cpu_task(seg: Segment, tid: int, host_by_ev: dict[int, HostOp]) -> Task:
    ev = seg.ev
    return Task(
        TaskKind.CPU,
        ev.name,
        seg.start,
        seg.end - seg.start,
        tid=tid,
        ev=ev,
        host=host_by_ev.get(id(ev)),
        head=seg.head,
    )


def _thread_edges(per_thread: dict[int, list[Task]]) -> None:
    """Cross-thread waits: a thread resuming right after another thread's task ended."""
    if len(per_thread) < 2:
        return
    ends = sorted((t.end, tid, i) for tid, chain in per_thread.items() for i, t in enumerate(chain))
    keys = [e[0] for e in ends]
    for tid, chain in per_thread.items():
        for i, task in enumerate(chain):
            lo = chain[i - 1].end if i else None
            if lo is not None and task.start - lo < WAIT_MIN_GAP_NS:
                continue
            k = bisect.bisect_right(keys, task.start) - 1
            while k >= 0 and ends[k][1] == tid:
                k -= 1
            if k < 0:
                continue
            end, other, j = ends[k]
            if lo is None or end >= lo + (task.start - lo) // 2:
                task.data.append(per_thread[other][j])
