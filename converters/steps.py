"""Choosing the measured iteration: one `ProfilerStep#N` window of a Kineto trace.

The default is the last complete step: every launch inside it has its GPU op in the
trace (a profiler window often cuts the final step's GPU tail). A trace without step
annotations is taken whole.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from lumos.converters.kineto import KEvent, Kind

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


def is_step(ev: KEvent) -> bool:
    return ev.kind is Kind.ANNOTATION and ev.name.startswith(STEP_PREFIX)


def main_pid(events: list[KEvent]) -> int:
    counts = Counter(e.pid for e in events if e.kind in (Kind.CPU_OP, Kind.RUNTIME))
    return counts.most_common(1)[0][0] if counts else 0


def choose_step(events: list[KEvent], path: str, step: int | None = None) -> StepWindow:
    """The window of `ProfilerStep#<step>` (default: the last complete one).

    Raises LinkError if `step` is given and not in the trace.
    """
    steps = sorted((e for e in events if is_step(e)), key=lambda e: e.ts)
    if step is not None:
        wanted = f"{STEP_PREFIX}{step}"
        chosen = [e for e in steps if e.name == wanted]
        if not chosen:
            names = ", ".join(e.name for e in steps) or "none"
            raise LinkError(f"{path}: no {wanted} (steps in the trace: {names})")
        ev = chosen[-1]
        return StepWindow(ev.name, ev.ts, ev.ts + ev.dur, ev.pid, True)
    if not steps:
        cpu = [e for e in events if e.kind is not Kind.GPU and e.kind is not Kind.SYNC]
        pid = main_pid(events)
        start = min((e.ts for e in cpu), default=0)
        end = max((e.ts + e.dur for e in cpu), default=0)
        return StepWindow("whole trace", start, end, pid, False)
    gpu_corr = {e.corr for e in events if e.kind is Kind.GPU}
    launches = sorted(
        (e.ts, e.corr in gpu_corr)
        for e in events
        if e.kind is Kind.RUNTIME and e.corr >= 0 and _launches_gpu(e.name)
    )
    for ev in reversed(steps):
        inside = [ok for ts, ok in launches if ev.ts <= ts < ev.ts + ev.dur]
        if all(inside):
            return StepWindow(ev.name, ev.ts, ev.ts + ev.dur, ev.pid, True)
    ev = steps[-1]
    return StepWindow(ev.name, ev.ts, ev.ts + ev.dur, ev.pid, True)


def _launches_gpu(name: str) -> bool:
    return "Launch" in name or "Memcpy" in name or "Memset" in name
