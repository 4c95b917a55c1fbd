"""GPU ops whose launch call the Kineto trace does not have.

Kineto pairs each GPU op with the runtime call that launched it by `correlation`. Some
ops have no such call in the trace: Triton's kernels before Kineto recorded driver-API
launches (`cuLaunchKernel`, pytorch/kineto#752), launch APIs a trace version leaves out
(HTA's critical path saw the same "orphaned" kernels, HolisticTraceAnalysis#271), and
records CUPTI dropped when its buffers filled (pytorch/pytorch#192021). Such an op still
ran on its stream and held the ops queued behind it, so it is kept: an op of the step's
devices that started inside the step (before the step's last launched op started, which
covers the GPU running behind the CPU) and whose correlation matches no runtime call.
Its stand-in launch is the step's last CPU task of the kernel's own name that ended by
the op's start (Inductor wraps each Triton launch in a record function named after the
kernel), else the CPU task, on any thread of the process, that ended last at or before
the op started: replay enqueues it then, behind its stream, with its recorded dispatch
delay, never earlier than a launch could have been.
"""

from __future__ import annotations

import numpy as np

from lumos.converters.pytorch.kineto import Kind, KinetoTrace
from lumos.converters.pytorch.steps import StepWindow


def orphan_rows(trace: KinetoTrace, window: StepWindow, linked: np.ndarray) -> np.ndarray:
    """Kineto rows of the step's GPU ops whose launch call is not in the trace.

    `linked` are the rows of the GPU ops whose launch is in the step; an orphan is on one
    of their devices and starts from the step's start to the last of their starts (or
    the step's end, if later). None without linked ops: nothing says which device or
    process the step ran on.
    """
    if not len(linked):
        return np.zeros(0, np.int64)
    kind, corr = trace.kind, trace.corr
    calls = corr[(kind == Kind.RUNTIME) & (corr >= 0)]
    gpu = np.flatnonzero(kind == Kind.GPU)
    gpu = gpu[~np.isin(corr[gpu], calls)]
    hi = max(window.end, int(trace.ts[linked].max()))
    ts = trace.ts[gpu]
    keep = (ts >= window.start) & (ts < hi) & np.isin(trace.pid[gpu], trace.pid[linked])
    return gpu[keep]


def stand_in_launches(
    cpu_name: np.ndarray,
    cpu_start: np.ndarray,
    cpu_end: np.ndarray,
    op_name: np.ndarray,
    op_start: np.ndarray,
) -> np.ndarray:
    """Per orphan op: the CPU task (index into the `cpu_*` columns) of the op's name that
    ended last by the op's start, else the task of any name that did (the later start on
    a tie), or -1 when none had. Names are ids into one table."""
    out = np.full(len(op_start), -1, np.int64)
    if not len(cpu_end) or not len(op_start):
        return out
    order = np.lexsort((cpu_start, cpu_end))
    k = np.searchsorted(cpu_end[order], op_start, side="right") - 1
    out = np.where(k >= 0, order[np.maximum(k, 0)], -1).astype(np.int64)
    named = np.flatnonzero(np.isin(cpu_name, op_name))
    by_name = named[np.lexsort((cpu_start[named], cpu_end[named], cpu_name[named]))]
    names = cpu_name[by_name]
    for i in np.flatnonzero(np.isin(op_name, names)).tolist():
        lo, hi = (
            np.searchsorted(names, op_name[i], "left"),
            np.searchsorted(names, op_name[i], "right"),
        )
        j = int(np.searchsorted(cpu_end[by_name[lo:hi]], op_start[i], side="right")) - 1
        if j >= 0:
            out[i] = by_name[lo + j]
    return out


def pair_with_bare_launches(op_start: np.ndarray, launch_start: np.ndarray) -> np.ndarray:
    """Per NCCL kernel without launch (in start order): the position in `launch_start`
    (sorted) of the launch call without GPU op that it pairs with, or -1.

    RCCL's kernels reach Kineto with correlation 0 while their `hipExtLaunchKernel` has
    its own (ROCm/roctracer#100): the call is there, with no op, and the op without a
    call. A communicator's kernels run in launch order, so each takes the earliest
    unpaired bare launch that started before it.
    """
    out = np.full(len(op_start), -1, np.int64)
    used = np.zeros(len(launch_start), bool)
    for i in np.argsort(op_start, kind="stable").tolist():
        free = np.flatnonzero(~used & (launch_start <= op_start[i]))
        if len(free):
            out[i] = free[0]
            used[free[0]] = True
    return out


def orphan_launch_times(
    launch_ts: np.ndarray, orphan: np.ndarray, stream: np.ndarray
) -> np.ndarray:
    """The launch times the stream searches use, with each orphan's put where it could
    have been launched (ops sorted by stream, then start; `launch_ts` of an orphan: its
    stand-in's end, or its own start).

    A stream runs its ops in launch order, so an orphan was launched after the op before
    it on its stream and before the linked op after it: its time is its stand-in's end
    kept between those two, and each stream's times stay sorted for the searches. It is
    never moved back to its predecessor's launch merely for being an orphan: a sync call
    made before the orphan's stand-in would then count the orphan as launched before it
    and wait for it, while the orphan waits for its stand-in behind that call, a cycle
    (a device sync closing one step, then a step whose first op on a stream has no
    launch record).
    """
    out = launch_ts.copy()
    orphans = np.flatnonzero(orphan)
    linked = np.flatnonzero(~orphan)
    nxt = np.searchsorted(linked, orphans)  # the next linked op of each orphan, if any
    nxt_pos = linked[np.minimum(nxt, max(len(linked) - 1, 0))] if len(linked) else orphans
    same = (nxt < len(linked)) & (stream[nxt_pos] == stream[orphans])
    hi = np.where(same, launch_ts[nxt_pos], np.iinfo(np.int64).max)
    for k, top in zip(orphans.tolist(), hi.tolist(), strict=True):
        own = min(int(out[k]), top)
        out[k] = max(int(out[k - 1]), own) if k and stream[k - 1] == stream[k] else own
    return out
