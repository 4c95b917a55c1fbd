"""One step for every rank when each rank chose its own.

Without `--step`, each rank converts its last complete `ProfilerStep` (`steps`). A
profiler window that cuts one rank's final step short of its GPU tail (the ranks stop
tracing at slightly different times) makes that rank fall back one step while the
others keep the last: the ranks' ETs then hold different iterations, whose collectives
still pair one for one, and replay compares a mix of steps with no warning. The set must
replay one step: the last one every rank has and every rank has complete, else the last
one every rank has.
"""

from __future__ import annotations

from collections.abc import Sequence

from lumos.converters.pytorch.rank_summary import RankSummary
from lumos.converters.pytorch.steps import STEP_PREFIX

#: `step_chosen_by` of a rank converted again with the step every rank agrees on.
AGREED = "the step of the other ranks (each rank's own last complete step differed)"


def _number(name: str) -> int | None:
    tail = name[len(STEP_PREFIX) :] if name.startswith(STEP_PREFIX) else ""
    return int(tail) if tail.isdigit() else None


def disagreement(summaries: Sequence[RankSummary]) -> str | None:
    """A line naming each rank's step when the ranks converted different ProfilerSteps."""
    chosen = {s.rank: s.step for s in summaries if s.steps}
    if len(set(chosen.values())) < 2:
        return None
    return "ranks converted different steps: " + ", ".join(
        f"rank {r} {name}" for r, name in sorted(chosen.items())
    )


def common_step(summaries: Sequence[RankSummary]) -> int | None:
    """The ProfilerStep number every rank should convert, or None when they already
    agree or share no step (then `disagreement` names what each took)."""
    listed = [s for s in summaries if s.steps]
    if disagreement(listed) is None:
        return None
    complete: list[set[int]] = []
    present: list[set[int]] = []
    for s in listed:
        numbers = {(_number(x.name), x.complete) for x in s.steps}
        present.append({n for n, _ in numbers if n is not None})
        complete.append({n for n, ok in numbers if n is not None and ok})
    for pool in (set.intersection(*complete), set.intersection(*present)):
        if pool:
            return max(pool)
    return None
