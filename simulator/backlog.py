"""The GPU is not empty when a step starts: each stream's backlog from the recorded times.

A measured step is the CPU loop's window. When the GPU lags the CPU, the step's first
kernels are launched on time but start long after their launch calls returned, queued
behind the previous step's work that the trace does not show. Replaying every stream
from empty would run them early and make a GPU-bound step look CPU-bound. The recorded
times say how long each stream stayed busy: when a stream's first op (earliest recorded
start) started after its launch call and every other recorded dependency had ended,
nothing in the step held it — the stream was still running earlier work, or the launch
took that long to reach the GPU. Such an op is held (`holds`): it starts `hold` after
the moment it could start, but no later than `step start + its recorded start` (nor
earlier than it could start). Unedited, the moment it could start is the one recorded
and the op starts where it did; when a what-if runs its dependencies earlier, it moves
earlier with them; when they run later, the recorded start absorbs the delay (the
backlog never adds to a wait the graph models). `stream_backlog` gives the recorded
start per stream, for the reports (`RankResult.gpu_free_ns`). A stream whose first op
has no recorded launch on a CPU thread, or whose dependencies explain its start, starts
free. The hold is the op's `gap_ns` (the converter writes a stream's first op's delay
there, from the recorded times, so a what-if that edits durations keeps it); an ET
written before that has it computed from the ET's durations as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lumos.simulator.graph import RankGraph
from lumos.simulator.processors import Assignment
from lumos.simulator.result import ProcKind


@dataclass(slots=True, frozen=True)
class Hold:
    """A stream's first op held past the moment it could start (local indices, ns)."""

    node: int
    proc: int
    hold_ns: int  # recorded start minus when its dependencies had ended
    start_ns: int  # recorded start after the step start: the latest it may start


def holds(g: RankGraph, a: Assignment) -> list[Hold]:
    """The held first op of each stream the trace shows busy at its start (module doc)."""
    kinds = a.processors
    is_stream = np.asarray([i.kind == ProcKind.GPU and i.key is not None for i in kinds] + [False])
    is_cpu = np.asarray([i.kind == ProcKind.CPU for i in kinds] + [False])
    rows = np.flatnonzero(is_stream[a.proc] & (g.start_ns >= 0)) if len(g) else np.zeros(0, int)
    if not rows.size:
        return []
    order = rows[np.lexsort((g.start_ns[rows], a.proc[rows]))]
    procs = a.proc[order]
    firsts = order[np.flatnonzero(np.r_[True, procs[1:] != procs[:-1]])]
    out: list[Hold] = []
    for first in firsts.tolist():
        deps = g.deps(first)
        deps = deps[(g.start_ns[deps] >= 0) & (g.dur_ns[deps] >= 0)]
        if not is_cpu[a.proc[deps]].any():
            continue  # no recorded launch: nothing says the op was queued
        ready = int((g.start_ns[deps] + g.dur_ns[deps]).max())
        start, hold = int(g.start_ns[first]), int(g.gap_ns[first])
        if hold > 0 or start > ready:
            out.append(Hold(first, int(a.proc[first]), hold or start - ready, start))
    return out


def stream_backlog(g: RankGraph, a: Assignment) -> dict[int, int]:
    """Processor index → time after the step start when that stream took its first node
    as recorded, for the streams the trace shows busy with earlier work (module doc)."""
    return {h.proc: h.start_ns for h in holds(g, a)}
