"""The GPU is not empty when a step starts: each stream's backlog from the recorded times.

A measured step is the CPU loop's window. When the GPU lags the CPU, the step's first
kernels are launched on time but start long after their launch calls returned, queued
behind the previous step's work that the trace does not show. Replaying every stream
from empty would run them early and make a GPU-bound step look CPU-bound. The recorded
times say how long each stream stayed busy: when a stream's first op (earliest recorded
start) started after its launch call and every other recorded dependency had ended,
nothing in the step held it — the stream was still running earlier work. Such a stream
is busy until `step start + that recorded start` and takes its first node no earlier
(its dependencies may hold it longer in a changed run). A stream whose first op has no
recorded launch on a CPU thread, or whose dependencies explain its start, starts free.
Being `busy until`, not `delayed by`, the backlog never adds to a wait the graph models.
"""

from __future__ import annotations

import numpy as np

from lumos.simulator.graph import RankGraph
from lumos.simulator.processors import Assignment
from lumos.simulator.result import ProcKind


def stream_backlog(g: RankGraph, a: Assignment) -> dict[int, int]:
    """Processor index → time after the step start when that stream can take its first
    node, for the streams the trace shows busy with earlier work (see module doc)."""
    kinds = a.processors
    is_stream = np.asarray([i.kind == ProcKind.GPU and i.key is not None for i in kinds] + [False])
    is_cpu = np.asarray([i.kind == ProcKind.CPU for i in kinds] + [False])
    rows = np.flatnonzero(is_stream[a.proc] & (g.start_ns >= 0)) if len(g) else np.zeros(0, int)
    if not rows.size:
        return {}
    order = rows[np.lexsort((g.start_ns[rows], a.proc[rows]))]
    procs = a.proc[order]
    firsts = order[np.flatnonzero(np.r_[True, procs[1:] != procs[:-1]])]
    out: dict[int, int] = {}
    for first in firsts.tolist():
        deps = g.deps(first)
        deps = deps[(g.start_ns[deps] >= 0) & (g.dur_ns[deps] >= 0)]
        if not is_cpu[a.proc[deps]].any():
            continue  # no recorded launch: nothing says the op was queued
        ready = int((g.start_ns[deps] + g.dur_ns[deps]).max())
        start = int(g.start_ns[first])
        if start > ready:
            out[int(a.proc[first])] = start
    return out
