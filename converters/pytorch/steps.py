"""Choosing the measured iteration: one `ProfilerStep#N` window of a Kineto trace.

The default is the last complete step: every launch inside it has its GPU op in the
trace (a profiler window often cuts the final step's GPU tail). A trace without step
annotations is taken whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lumos.converters.pytorch.kineto import Kind, KinetoTrace
from lumos.errors import LinkError

STEP_PREFIX = "ProfilerStep#"


@dataclass(frozen=True, slots=True)
class StepWindow:
    """The chosen window on the host clock (ns) and the process it belongs to."""

    name: str
    start: int
    end: int
    pid: int
    measured: bool  # a real ProfilerStep (its duration is the measured iteration time)


def step_name_mask(trace: KinetoTrace) -> np.ndarray:
    """By name id: does the name start with ProfilerStep#?"""
    return np.array([n.startswith(STEP_PREFIX) for n in trace.names] or [False], bool)


def step_rows(trace: KinetoTrace) -> np.ndarray:
    """Rows of the ProfilerStep annotations, in file order."""
    is_step = (trace.kind == Kind.ANNOTATION) & step_name_mask(trace)[trace.name]
    return np.flatnonzero(is_step)


def main_pid(trace: KinetoTrace) -> int:
    """The pid with the most CPU ops and runtime calls (the first seen on a tie)."""
    rows = np.flatnonzero((trace.kind == Kind.CPU_OP) | (trace.kind == Kind.RUNTIME))
    if not len(rows):
        return 0
    pids, first, counts = np.unique(trace.pid[rows], return_index=True, return_counts=True)
    best = np.flatnonzero(counts == counts.max())
    return int(pids[best[np.argmin(first[best])]])


def choose_step(trace: KinetoTrace, path: str, step: int | None = None) -> StepWindow:
    """The window of `ProfilerStep#<step>` (default: the last complete one).

    Raises LinkError if `step` is given and not in the trace.
    """
    rows = step_rows(trace)
    steps = rows[np.argsort(trace.ts[rows], kind="stable")].tolist()
    ts, dur, pid = trace.ts, trace.dur, trace.pid

    def window(row: int) -> StepWindow:
        start = int(ts[row])
        return StepWindow(trace.name_of(row), start, start + int(dur[row]), int(pid[row]), True)

    if step is not None:
        wanted = f"{STEP_PREFIX}{step}"
        chosen = [r for r in steps if trace.name_of(r) == wanted]
        if not chosen:
            names = ", ".join(trace.name_of(r) for r in steps) or "none"
            raise LinkError(f"{path}: no {wanted} (steps in the trace: {names})")
        return window(chosen[-1])
    kind = trace.kind
    if not steps:
        cpu = (kind != Kind.GPU) & (kind != Kind.SYNC)
        has = bool(cpu.any())
        start = int(ts[cpu].min()) if has else 0
        end = int((ts[cpu] + dur[cpu]).max()) if has else 0
        return StepWindow("whole trace", start, end, main_pid(trace), False)
    gpu_corr = np.unique(trace.corr[kind == Kind.GPU])
    launch_name = np.array([_launches_gpu(n) for n in trace.names] or [False], bool)
    launch = (kind == Kind.RUNTIME) & (trace.corr >= 0) & launch_name[trace.name]
    order = np.argsort(ts[launch], kind="stable")
    launch_ts = ts[launch][order]
    missing = ~np.isin(trace.corr[launch][order], gpu_corr)
    for row in reversed(steps):
        lo, hi = np.searchsorted(launch_ts, [ts[row], ts[row] + dur[row]], side="left")
        if not missing[lo:hi].any():
            return window(row)
    return window(steps[-1])


def _launches_gpu(name: str) -> bool:
    return "Launch" in name or "Memcpy" in name or "Memset" in name
