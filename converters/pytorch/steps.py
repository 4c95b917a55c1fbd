"""Choosing the measured iteration: one `ProfilerStep#N` window of a Kineto trace.

Every `ProfilerStep#N` of the trace is listed with its measured time and whether it is
complete: every launch inside it has its GPU op in the trace (a profiler window often
cuts the final step's GPU tail). The default is the last complete step (the last step
when none is); `--step N` picks another, `--step median` the typical one of a capture
of several (`resolve_step`). A trace without step annotations is taken
whole, and then nothing in it was measured: it has no iteration time to compare with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lumos.converters.pytorch.json_stream import TraceFile
from lumos.converters.pytorch.kineto import Kind, KinetoTrace
from lumos.errors import ConfigError, LinkError

STEP_PREFIX = "ProfilerStep#"
WHOLE_TRACE = "whole trace"


@dataclass(frozen=True, slots=True)
class StepInfo:
    """One `ProfilerStep#N` of the trace: its measured time (ns) and completeness."""

    name: str
    start: int
    dur: int
    complete: bool


@dataclass(frozen=True, slots=True)
class StepWindow:
    """The chosen window on the host clock (ns) and the process it belongs to.

    `steps`: every ProfilerStep of the trace in time order; `chosen_by`: why this one.
    """

    name: str
    start: int
    end: int
    pid: int
    measured: bool  # a real ProfilerStep (its duration is the measured iteration time)
    steps: tuple[StepInfo, ...] = ()
    chosen_by: str = ""


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


def list_steps(trace: KinetoTrace, rows: list[int]) -> list[StepInfo]:
    """Each step row's name, start, measured time and completeness."""
    kind, ts, dur = trace.kind, trace.ts, trace.dur
    gpu_corr = np.unique(trace.corr[kind == Kind.GPU])
    launch_name = np.array([_launches_gpu(n) for n in trace.names] or [False], bool)
    launch = (kind == Kind.RUNTIME) & (trace.corr >= 0) & launch_name[trace.name]
    order = np.argsort(ts[launch], kind="stable")
    launch_ts = ts[launch][order]
    missing = np.r_[0, np.cumsum(~np.isin(trace.corr[launch][order], gpu_corr))]
    starts, ends = ts[rows], ts[rows] + dur[rows]
    lo = np.searchsorted(launch_ts, starts, side="left")
    hi = np.searchsorted(launch_ts, ends, side="left")
    complete = (missing[hi] - missing[lo]) == 0
    return [
        StepInfo(trace.name_of(r), int(ts[r]), int(dur[r]), bool(c))
        for r, c in zip(rows, complete.tolist(), strict=True)
    ]


def choose_step(trace: KinetoTrace, path: str, step: int | None = None) -> StepWindow:
    """The window of `ProfilerStep#<step>` (default: the last complete one).

    Raises LinkError if `step` is given and not in the trace.
    """
    rows = step_rows(trace)
    rows_l = rows[np.argsort(trace.ts[rows], kind="stable")].tolist()
    infos = tuple(list_steps(trace, rows_l))
    pids = trace.pid

    def window(k: int, why: str) -> StepWindow:
        info = infos[k]
        end = info.start + info.dur
        pid = int(pids[rows_l[k]])
        return StepWindow(info.name, info.start, end, pid, True, infos, why)

    if step is not None:
        wanted = f"{STEP_PREFIX}{step}"
        chosen = [k for k, info in enumerate(infos) if info.name == wanted]
        if not chosen:
            names = ", ".join(info.name for info in infos) or "none"
            raise LinkError(f"{path}: no {wanted} (steps in the trace: {names})")
        return window(chosen[-1], "picked by --step")
    if not infos:
        kind, ts, dur = trace.kind, trace.ts, trace.dur
        cpu = (kind != Kind.GPU) & (kind != Kind.SYNC)
        has = bool(cpu.any())
        start = int(ts[cpu].min()) if has else 0
        end = int((ts[cpu] + dur[cpu]).max()) if has else 0
        why = "no ProfilerStep in the trace: nothing measured"
        return StepWindow(WHOLE_TRACE, start, end, main_pid(trace), False, (), why)
    complete = [k for k, info in enumerate(infos) if info.complete]
    if complete:
        return window(complete[-1], "the last complete step")
    return window(len(infos) - 1, "the last step (none has all its GPU work in the trace)")


def _launches_gpu(name: str) -> bool:
    return "Launch" in name or "Memcpy" in name or "Memset" in name


def resolve_step(step: int | str | None, kineto: list[TraceFile]) -> int | None:
    """`step` as a number: "median" is the typical step of a multi-step capture
    (`capture.representative_step` over the ranks' Kineto traces, the same on every
    rank). Raises ConfigError for another word, TraceFormatError when "median" finds no
    ProfilerStep."""
    if step is None or isinstance(step, int):
        return step
    if step != "median":
        raise ConfigError(f"--step takes a ProfilerStep number or 'median', not {step!r}")
    from lumos.converters.pytorch.capture import representative_step

    return representative_step(kineto) if kineto else None
