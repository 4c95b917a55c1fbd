"""Where a rank's step ends: its last node, or later by the untraced tail of the step.

A measured `ProfilerStep` ends on the thread that runs the training loop, some time
after that thread's last traced op (Python between the last op and `profiler.step()`,
the loop's own bookkeeping). That tail is untraced CPU time like a node's `gap_ns`, and
it stays when the step is replayed: the step thread is the CPU thread whose last
recorded node ends latest; its tail = `measured_step_ns` - that recorded end. A rank's
simulated step then ends at max(last node end, step thread's last simulated end + tail).
ETs without recorded start times or a measured step have no tail.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lumos.simulator.graph import RankGraph
from lumos.simulator.processors import Assignment
from lumos.simulator.result import ProcKind


@dataclass(frozen=True, slots=True)
class StepTail:
    """The step thread (processor index of the rank) and its untraced tail in ns."""

    proc: int
    tail_ns: int


def step_tail(g: RankGraph, a: Assignment) -> StepTail | None:
    """The recorded tail of `g`'s step, or None when it cannot be known (or is 0)."""
    if not g.measured_step_ns or not len(g):
        return None
    kinds = a.kinds()
    cpu = np.asarray([p.kind == ProcKind.CPU and p.key is not None for p in a.processors])
    on_thread = cpu[a.proc] & (g.start_ns >= 0) & (g.dur_ns >= 0)
    if not on_thread.any() or not kinds.size:
        return None
    rows = np.flatnonzero(on_thread)
    ends = g.start_ns[rows] + g.dur_ns[rows]
    last = int(rows[int(np.argmax(ends))])
    tail = int(g.measured_step_ns) - int(ends.max())
    return StepTail(int(a.proc[last]), tail) if tail > 0 else None


def rank_end(end_ns: np.ndarray, proc: np.ndarray, tail: StepTail | None) -> int:
    """Simulated end of a rank's step from its nodes' ends (and processors)."""
    if not end_ns.size:
        return 0
    last = int(end_ns.max())
    if tail is None:
        return last
    on_thread = end_ns[proc == tail.proc]
    return max(last, int(on_thread.max()) + tail.tail_ns) if on_thread.size else last
