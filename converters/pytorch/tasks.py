"""The execution graph's records: one row of a `TaskTable` is one node to be written.

Builders (`exec_graph` from Kineto, `host_graph` from a host ET alone) fill the table's
numpy columns; each task runs on one processor (a CPU thread `tid` or a GPU `stream`),
may stand for a Kineto event (`ev`, a row of the trace) and a host-ET op (`host`, a row
of the host trace), and has at most one control dependency (`ctrl`: the task before it
on its processor) plus data dependencies (`data1`, then the rare `extra` ones, in the
order they were found). `finalize` numbers tasks deterministically (by start time,
processor and creation order) and fills `gap_ns` on CPU threads (in each thread's chain
order: start, then creation), so the writer only formats. A gap counts from where the
previous task ended as recorded: a sync call shortened to the time it ran after its GPU
work (`waited`) still ended at its recorded end, so its wait, replayed through the edge,
is not replayed a second time as untraced gap. A recorded GPU op after another on its
stream gets a gap too, its dispatch delay: how much later it started than it could have
(`ready_ns`: its stream predecessor, its launch and its other dependencies had ended),
up to `GPU_GAP_MAX_NS` (1-5 µs between queued kernels on A100/H100; without it a
GPU-bound step of many short kernels, or a CUDA graph, replays 2-3 % short). Replay
counts it from when the op can start, not from the stream's previous end.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class TaskKind(enum.IntEnum):
    """What a task becomes in Chakra."""

    CPU = 0
    GPU = 1
    COLL = 2
    SEND = 3
    RECV = 4


COMM_KINDS = (TaskKind.COLL, TaskKind.SEND, TaskKind.RECV)
#: the most GPU idle time kept as an op's `gap`: past it the idle is a wait the trace does
#: not name (for peers, for another stream), not the front end's dispatch overhead.
GPU_GAP_MAX_NS = 10_000
INT_COLUMNS = ("start", "dur", "tid", "stream", "device", "ev", "host", "ctrl", "data1")
_DEFAULTS = {"tid": -1, "stream": -1, "device": -1, "ev": -1, "host": -1, "ctrl": -1, "data1": -1}


def _i64() -> np.ndarray:
    return np.zeros(0, np.int64)


@dataclass(slots=True)
class TaskTable:
    """All tasks of one rank as columns (times in ns, absolute)."""

    names: list[str]
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    name: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    start: np.ndarray = field(default_factory=_i64)
    dur: np.ndarray = field(default_factory=_i64)
    tid: np.ndarray = field(default_factory=_i64)
    stream: np.ndarray = field(default_factory=_i64)
    device: np.ndarray = field(default_factory=_i64)
    ev: np.ndarray = field(default_factory=_i64)
    host: np.ndarray = field(default_factory=_i64)
    ctrl: np.ndarray = field(default_factory=_i64)
    data1: np.ndarray = field(default_factory=_i64)
    head: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    #: task → further data dependencies, after `data1`.
    extra: dict[int, list[int]] = field(default_factory=dict)
    #: task → attributes to write (names starting with "_" are internal).
    attrs: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: sync task → ns of its recorded duration that is now a dependency edge (the wait
    #: for GPU work): the call still ended at start + dur + waited on its thread.
    waited: dict[int, int] = field(default_factory=dict)
    #: what the builder counted for the conversion report (e.g. "syncs" by outcome).
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    #: after finalize: task index of each node, in id order (node id = position + 1).
    order: np.ndarray = field(default_factory=_i64)
    #: after finalize: gap_ns of each task.
    gap: np.ndarray = field(default_factory=_i64)

    def __len__(self) -> int:
        return len(self.kind)

    def append(self, **columns: Any) -> np.ndarray:
        """Add rows given as equal-length sequences (missing columns get their default)."""
        size = len(columns["kind"])
        base = len(self)
        self.kind = np.concatenate([self.kind, np.asarray(columns["kind"], np.int8)])
        self.name = np.concatenate([self.name, np.asarray(columns["name"], np.int32)])
        for key in INT_COLUMNS:
            given = columns.get(key)
            values = (
                np.full(size, _DEFAULTS.get(key, 0), np.int64)
                if given is None
                else np.asarray(given, np.int64)
            )
            setattr(self, key, np.concatenate([getattr(self, key), values]))
        head = columns.get("head")
        self.head = np.concatenate(
            [self.head, np.ones(size, bool) if head is None else np.asarray(head, bool)]
        )
        return np.arange(base, base + size)

    def end(self, task: int) -> int:
        return int(self.start[task] + self.dur[task])

    def add_data(self, task: int, dep: int) -> None:
        self.extra.setdefault(task, []).append(dep)

    def data_of(self, task: int) -> list[int]:
        first = int(self.data1[task])
        return ([first] if first >= 0 else []) + self.extra.get(task, [])

    def attrs_of(self, task: int) -> dict[str, Any]:
        return self.attrs.setdefault(task, {})

    def name_of(self, task: int) -> str:
        return self.names[self.name[task]]


def finalize(table: TaskTable, step_start: int) -> None:
    """Number tasks deterministically and fill `gap` on CPU threads (from recorded ends)."""
    n = len(table)
    index = np.arange(n)
    is_comp_cpu = table.kind == TaskKind.CPU
    table.order = np.lexsort((index, table.stream, table.tid, ~is_comp_cpu, table.start))
    gap = np.zeros(n, np.int64)
    # a thread's tasks in its chain order (start, then creation), whatever their kind
    on_thread = index[(table.tid >= 0) & (table.stream < 0)]
    on_thread = on_thread[np.argsort(table.start[on_thread], kind="stable")]
    tids = table.tid[on_thread]
    waited = None
    if table.waited:
        waited = np.zeros(n, np.int64)
        waited[list(table.waited)] = list(table.waited.values())
    for tid in np.unique(tids).tolist():
        rows = on_thread[tids == tid]
        ends = table.start[rows] + table.dur[rows]
        if waited is not None:
            ends += waited[rows]
        prev = np.empty(len(rows), np.int64)
        prev[0] = step_start
        prev[1:] = np.maximum.accumulate(ends)[:-1]
        gap[rows] = np.maximum(0, table.start[rows] - prev)
    _stream_gaps(table, gap)
    table.gap = gap


def _stream_gaps(table: TaskTable, gap: np.ndarray) -> None:
    """Fill `gap` of recorded GPU ops that have a predecessor on their stream (in place):
    how much later than `ready_ns` each started, capped at GPU_GAP_MAX_NS. A stream's
    first op launched by a (non-blocking) call gets its whole delay, not capped: its hold
    (`simulator.backlog`), kept here so a what-if that edits durations reads it as
    recorded."""
    recorded = (table.stream >= 0) & (table.ev >= 0)
    ops = np.flatnonzero(recorded & (table.ctrl >= 0))
    if len(ops):
        late = table.start[ops] - ready_ns(table, ops, blocking_from_call=True)
        gap[ops] = np.clip(late, 0, np.where(_blocking(table, ops), late, GPU_GAP_MAX_NS))
    firsts = np.flatnonzero(recorded & (table.ctrl < 0) & (table.data1 >= 0))
    firsts = firsts[table.kind[table.data1[firsts]] == TaskKind.CPU]
    firsts = firsts[~_blocking(table, firsts)]
    if len(firsts):
        gap[firsts] = np.maximum(table.start[firsts] - ready_ns(table, firsts), 0)


def _blocking(table: TaskTable, ops: np.ndarray) -> np.ndarray:
    """Which GPU ops of `ops` started, as recorded, before their launch call returned."""
    first = np.maximum(table.data1[ops], 0)
    launched = (table.data1[ops] >= 0) & (table.kind[first] == TaskKind.CPU)
    return launched & (table.start[first] + table.dur[first] > table.start[ops])


def ready_ns(table: TaskTable, ops: np.ndarray, blocking_from_call: bool = False) -> np.ndarray:
    """When each GPU op of `ops` could have started, as recorded: when its stream
    predecessor and every dependency had ended. A launch counts from its end, or, when the
    op began before its call returned (a blocking call: a synchronous or pageable copy),
    from the op's own start — or with `blocking_from_call` from the call's start: replay
    queues a blocking call's op as the call begins (`simulator.blocking`), so the op's
    gap (not capped: the call's own staging time, not a wait) counts from the later of
    the call's start and its stream predecessor's end, and a copy behind a kernel that a
    what-if shortens starts earlier."""
    start = table.start[ops]
    prev = table.ctrl[ops]
    ready = np.where(prev >= 0, _ends(table, np.maximum(prev, 0)), np.iinfo(np.int64).min)
    first = table.data1[ops]
    has = first >= 0
    dep_end = _ends(table, np.maximum(first, 0))
    launched = has & (table.kind[np.maximum(first, 0)] == TaskKind.CPU)
    blocking = launched & (dep_end > start)
    from_call = table.start[np.maximum(first, 0)] if blocking_from_call else start
    dep_end = np.where(blocking, from_call, dep_end)
    ready = np.maximum(ready, np.where(has, dep_end, ready))
    if table.extra:
        # only the rows asked for, not the whole table: the graph-launch joins and the
        # wait inference ask for one op at a time, once per op (`bench_convert_scale.py`)
        extra = table.extra
        found: list[tuple[int | None, list[int] | None]]
        if len(ops) <= len(extra):
            found = [(k, extra.get(t)) for k, t in enumerate(ops.tolist())]
        else:
            pos = {int(t): k for k, t in enumerate(ops.tolist())}
            found = [(pos.get(t), deps) for t, deps in extra.items()]
        for k, deps in found:
            if k is not None and deps:
                ready[k] = max(int(ready[k]), max(table.end(d) for d in deps))
    return ready


def _ends(table: TaskTable, rows: np.ndarray) -> np.ndarray:
    """Recorded end (ns) of each task of `rows`."""
    return table.start[rows] + table.dur[rows]
