"""Where a rank's step ends: the CPU window of the loop, and the GPU work that outlives it.

A measured `ProfilerStep` is the CPU loop's window: it ends on the thread that runs the
training loop, some time after that thread's last traced op (Python between the last op
and `profiler.step()`, the loop's own bookkeeping). That tail is untraced CPU time like a
node's `gap_ns`, and it stays when the step is replayed: the step thread is the CPU
thread whose last recorded node ends latest; its tail = `measured_step_ns` - that
recorded end (negative when that op outlived the step). A blocking sync's recorded
duration is only what it ran after the GPU work it waited for, so it ended that long
after that work (`recorded_ends`). When the GPU lags the CPU, the step's last kernels run
past that window. So a rank's step has two ends: the CPU window (step thread's last
simulated end + tail: what `ProfilerStep` measures) and the GPU-inclusive end (the later
of that and the last node's end). ETs without recorded start times or a measured step
have no step thread: both ends are the last node's end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lumos.simulator.graph import RankGraph, SyncKind
from lumos.simulator.processors import Assignment
from lumos.simulator.result import ProcKind


@dataclass(frozen=True, slots=True)
class StepTail:
    """The step thread (processor index of the rank) and its untraced tail in ns (< 0:
    its last recorded op ended after the measured step)."""

    proc: int
    tail_ns: int


def step_tail(g: RankGraph, a: Assignment) -> StepTail | None:
    """The step thread and recorded tail of `g`'s step, or None when it cannot be known."""
    if not g.measured_step_ns or not len(g):
        return None
    kinds = a.kinds()
    cpu = np.asarray([p.kind == ProcKind.CPU and p.key is not None for p in a.processors])
    on_thread = cpu[a.proc] & (g.start_ns >= 0) & (g.dur_ns >= 0)
    if not on_thread.any() or not kinds.size:
        return None
    rows = np.flatnonzero(on_thread)
    ends = recorded_ends(g, rows)
    last = int(rows[int(np.argmax(ends))])
    tail = int(g.measured_step_ns) - int(ends.max())
    return StepTail(int(a.proc[last]), tail)


#: sync calls that block their thread until the GPU work they wait for has ended
_BLOCKING = (SyncKind.DEVICE, SyncKind.STREAM, SyncKind.EVENT)


def recorded_ends(g: RankGraph, rows: np.ndarray) -> np.ndarray:
    """When the nodes `rows` ended as recorded. A blocking sync's `dur_ns` is only the
    time it ran after the GPU ops it waited for (the wait is its edges to them), so it
    ended that long after the later of its start and their recorded ends."""
    ends = g.start_ns[rows] + g.dur_ns[rows]
    for k in np.flatnonzero(np.isin(g.sync_kind[rows], _BLOCKING)).tolist():
        v = int(rows[k])
        deps = g.dep_idx[g.dep_ptr[v] : g.dep_ptr[v + 1]]
        deps = deps[(g.stream[deps] >= 0) & (g.start_ns[deps] >= 0) & (g.dur_ns[deps] >= 0)]
        if len(deps):
            done = int((g.start_ns[deps] + g.dur_ns[deps]).max())
            ends[k] = max(int(ends[k]), max(int(g.start_ns[v]), done) + int(g.dur_ns[v]))
    return ends


@dataclass(frozen=True, slots=True)
class StepEnd:
    """Simulated ends of a rank's step: the CPU loop's window and the GPU-inclusive end."""

    cpu_ns: int
    all_ns: int


def rank_end(end_ns: np.ndarray, proc: np.ndarray, tail: StepTail | None) -> StepEnd:
    """Simulated ends of a rank's step from its nodes' ends (and processors)."""
    if not end_ns.size:
        return StepEnd(0, 0)
    last = int(end_ns.max())
    on_thread = end_ns[proc == tail.proc] if tail is not None else end_ns[:0]
    if tail is None or not on_thread.size:
        return StepEnd(last, last)
    cpu = int(on_thread.max()) + tail.tail_ns
    return StepEnd(cpu, max(last, cpu))
