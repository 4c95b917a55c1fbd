"""The critical path of a simulated run: the chain of tasks that set the step time.

The walk starts at the node that finished last (on any rank) and goes backwards, each
time to whatever released the current task: the dependency or processor predecessor that
ended last before it started; for a collective or send/recv that waited for a late peer,
the peer's task on its own rank (the path crosses ranks there); for a sync call that
waited for the GPU, the GPU task that ended when the wait did. It starts at the latest
GPU-inclusive step end, so when the GPU is the bottleneck the path follows GPU work; a
stream's first task held by the previous step's work (`RankResult.gpu_free_ns`) ends
the walk with a backlog step. Every nanosecond of [0, end) is credited to exactly one
step — a task's active time, a wait, a backlog or a gap (untraced host time, launch
offsets) — so the path's total equals the slowest GPU-inclusive step end.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from enum import Enum

import numpy as np

from lumos.simulator.result import ProcKind, SimResult


class StepKind(str, Enum):
    """What a stretch of the critical path was spent on."""

    TASK = "task"  # a task's active time
    WAIT = "wait"  # blocked inside a task (late peer, sync) with no better explanation
    GAP = "gap"  # between a task's release and its start: untraced time, step-start offset
    BACKLOG = "backlog"  # a stream still running the previous step's work


@dataclass(slots=True, frozen=True)
class PathStep:
    """One stretch [start_ns, end_ns) of the path, on `rank`; `row` -1 for gaps."""

    kind: StepKind
    rank: int
    row: int
    node_id: int
    name: str
    category: str
    start_ns: int
    end_ns: int

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(slots=True, frozen=True)
class Contributor:
    """Time the path spends in one name or category."""

    name: str
    category: str
    total_ns: int
    count: int
    share: float  # of the path's total

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "category": self.category,
            "total_ns": self.total_ns,
            "count": self.count,
            "share": round(self.share, 6),
        }


@dataclass(slots=True, frozen=True)
class CriticalPath:
    """The path in time order; `total_ns` equals the latest GPU-inclusive step end."""

    total_ns: int
    steps: tuple[PathStep, ...]

    @property
    def ranks(self) -> list[int]:
        """Ranks the path passes through, in order of first visit."""
        return list(dict.fromkeys(s.rank for s in self.steps))

    def _group(self, key: str) -> list[Contributor]:
        totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        for step in self.steps:
            name = step.category if key == "category" else step.name
            entry = totals[(name, step.category)]
            entry[0] += step.dur_ns
            entry[1] += 1
        denom = self.total_ns or 1
        out = [Contributor(n, c, t, k, t / denom) for (n, c), (t, k) in totals.items()]
        out.sort(key=lambda c: (-c.total_ns, c.name))
        return out

    def by_name(self, top: int | None = None) -> list[Contributor]:
        """Contributors grouped by node name, largest first."""
        return self._group("name")[:top]

    def by_category(self) -> list[Contributor]:
        """Contributors grouped by category (gpu compute, communication, cpu, wait for
        peers, wait (sync), gpu backlog, gap)."""
        return self._group("category")

    def to_dict(self, top: int = 10) -> dict[str, object]:
        return {
            "total_ns": self.total_ns,
            "steps": len(self.steps),
            "ranks": self.ranks,
            "by_category": [c.to_dict() for c in self.by_category()],
            "top": [c.to_dict() for c in self.by_name(top)],
        }


_CATEGORY = {ProcKind.GPU: "gpu compute", ProcKind.CPU: "cpu", ProcKind.COMM: "communication"}


class _Walker:
    """Holds per-rank lookups while walking; built once per `critical_path` call."""

    def __init__(self, result: SimResult) -> None:
        self.result = result
        self.proc_prev: dict[int, np.ndarray] = {}
        self.ends_sorted: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.last_arrival = self._last_arrivals()

    def _last_arrivals(self) -> dict[int, tuple[int, int]]:
        """match id → (rank index, row) of the member that arrived last."""
        best: dict[int, tuple[int, int, int]] = {}
        for k, rank in enumerate(self.result.ranks):
            if rank.folded_from is not None:
                continue  # shares its representative's rows
            rows = np.flatnonzero(rank.tasks.match >= 0)
            for row, match, start in zip(
                rows.tolist(),
                rank.tasks.match[rows].tolist(),
                rank.tasks.start_ns[rows].tolist(),
                strict=True,
            ):
                if match not in best or start > best[match][0]:
                    best[match] = (start, k, row)
        return {m: (k, row) for m, (_, k, row) in best.items()}

    def prev_on_proc(self, k: int, row: int) -> int:
        if k not in self.proc_prev:
            tasks = self.result.ranks[k].tasks
            order = np.lexsort((tasks.end_ns, tasks.start_ns, tasks.proc))
            prev = np.full(len(tasks), -1, dtype=np.int64)
            same = tasks.proc[order[1:]] == tasks.proc[order[:-1]]
            prev[order[1:][same]] = order[:-1][same]
            self.proc_prev[k] = prev
        return int(self.proc_prev[k][row])

    def preds(self, k: int, row: int) -> list[int]:
        out = []
        graphs = self.result.graphs
        if k < len(graphs):
            graph = graphs[k]
            lo, hi = int(graph.dep_ptr[row]), int(graph.dep_ptr[row + 1])
            out = graph.dep_idx[lo:hi].tolist()
        prev = self.prev_on_proc(k, row)
        if prev >= 0:
            out.append(prev)
        return out

    def ended_at(self, k: int, time: int, exclude_proc: int) -> int:
        """A task of rank k, on another processor, that ended exactly at `time`; else -1."""
        if k not in self.ends_sorted:
            ends = self.result.ranks[k].tasks.end_ns
            order = np.argsort(ends, kind="stable")
            self.ends_sorted[k] = (order, ends[order])
        order, ends = self.ends_sorted[k]
        procs = self.result.ranks[k].tasks.proc
        i = int(np.searchsorted(ends, time, side="left"))
        while i < ends.size and ends[i] == time:
            if procs[order[i]] != exclude_proc:
                return int(order[i])
            i += 1
        return -1

    def category(self, k: int, row: int) -> str:
        rank = self.result.ranks[k]
        if rank.tasks.is_comm[row]:
            return "communication"
        kind = rank.processors[int(rank.tasks.proc[row])].kind
        return _CATEGORY.get(kind, "other")


def critical_path(result: SimResult) -> CriticalPath:
    """Walk the critical path of `result` back from its last-finishing node."""
    if not result.ranks or all(len(r.tasks) == 0 for r in result.ranks):
        return CriticalPath(0, ())
    walker = _Walker(result)
    ends = [r.gpu_end_ns if len(r.tasks) else -1 for r in result.ranks]  # with any tail
    k = int(np.argmax(ends))
    row = int(np.argmax(result.ranks[k].tasks.end_ns))
    cursor = ends[k]
    steps: list[PathStep] = []
    seen: set[tuple[int, int]] = set()  # guards against zero-length cycles of equal times

    def credit(lo: int, kind: StepKind, k: int, row: int) -> None:
        nonlocal cursor
        lo = min(lo, cursor)
        if lo < cursor:
            tasks = result.ranks[k].tasks
            rank = result.ranks[k].rank
            if kind is StepKind.GAP:
                steps.append(PathStep(kind, rank, -1, -1, "(gap)", "gap", lo, cursor))
            elif kind is StepKind.BACKLOG:
                name, cat = "(previous step's GPU work)", "gpu backlog"
                steps.append(PathStep(kind, rank, -1, -1, name, cat, lo, cursor))
            else:
                cat = walker.category(k, row)
                if kind is StepKind.WAIT:
                    cat = "wait for peers" if tasks.is_comm[row] else "wait (sync)"
                node = int(tasks.node_id[row])
                steps.append(PathStep(kind, rank, row, node, tasks.name(row), cat, lo, cursor))
            cursor = lo

    while True:
        seen.add((k, row))
        tasks = result.ranks[k].tasks
        start, wait = int(tasks.start_ns[row]), int(tasks.wait_ns[row])
        credit(int(tasks.end_ns[row]), StepKind.GAP, k, row)
        credit(start + wait, StepKind.TASK, k, row)
        if wait > 0:
            if tasks.is_comm[row] and int(tasks.match[row]) in walker.last_arrival:
                late = walker.last_arrival[int(tasks.match[row])]
                if late not in seen and result.ranks[late[0]].tasks.start_ns[late[1]] > start:
                    k, row = late  # the path continues on the late peer's rank
                    tasks = result.ranks[k].tasks
                    start = int(tasks.start_ns[row])
            else:
                waited = walker.ended_at(k, start + wait, int(tasks.proc[row]))
                if waited >= 0 and (k, waited) not in seen:
                    row = waited
                    continue
            credit(start, StepKind.WAIT, k, row)
        candidates = [
            p for p in walker.preds(k, row) if int(tasks.end_ns[p]) <= cursor and (k, p) not in seen
        ]
        free = result.ranks[k].gpu_free_ns.get(int(tasks.proc[row]))
        if free == start and all(int(tasks.end_ns[p]) < start for p in candidates):
            credit(result.ranks[k].start_ns, StepKind.BACKLOG, k, row)
            break
        if not candidates:
            break
        row = max(candidates, key=lambda p: (int(tasks.end_ns[p]), -p))
    credit(0, StepKind.GAP, k, row)
    steps.reverse()
    return CriticalPath(ends[int(np.argmax(ends))], tuple(steps))
