"""Aligning ranks on the shared trace clock: each rank starts when it started the step.

Ranks do not enter a step together: a rank that finished the previous step late starts
this one late, and its measured `ProfilerStep` is shorter by that skew (the first
collective or receive absorbs it on the early ranks). Replaying every rank from t = 0
hides that and makes early ranks look slow. When every loaded rank carries
`step_start_ns` (the absolute step start on the trace clock) and the ranks plausibly
share a clock — their starts lie closer together than the longest measured step —
rank r starts at `step_start_ns[r] - min(step_start_ns)`; its iteration time is then its
last end minus its own start. Otherwise every rank starts at 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from lumos.simulator.graph import RankGraph


@dataclass(frozen=True, slots=True)
class Alignment:
    """Start offset of every loaded rank (ns, min 0) and why ranks are not aligned."""

    offsets: dict[int, int] = field(default_factory=dict)
    aligned: bool = False
    reason: str = ""

    def offset(self, rank: int) -> int:
        return self.offsets.get(rank, 0)


def align_ranks(graphs: Sequence[RankGraph], enabled: bool = True) -> Alignment:
    """Per-rank start offsets from `step_start_ns`, or all zeros (with the reason)."""
    zeros = {g.rank: 0 for g in graphs}
    if not enabled:
        return Alignment(zeros, False, "disabled")
    if len(graphs) < 2:
        return Alignment(zeros, False, "single rank")
    missing = [g.rank for g in graphs if g.step_start_ns is None]
    if missing:
        return Alignment(zeros, False, f"no step_start_ns on rank(s) {missing[:8]}")
    starts = {g.rank: int(g.step_start_ns) for g in graphs}  # type: ignore[arg-type]
    lo, hi = min(starts.values()), max(starts.values())
    longest = max((g.measured_step_ns or 0 for g in graphs), default=0)
    if hi - lo >= longest:
        return Alignment(
            zeros,
            False,
            f"step starts spread {hi - lo} ns, not less than the longest step "
            f"({longest} ns): ranks do not share a clock",
        )
    return Alignment({r: s - lo for r, s in starts.items()}, True)
