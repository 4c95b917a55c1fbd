"""Simulated vs measured: step time per rank and busy time per stream and thread.

The measured side comes from the ETs themselves: GlobalMetadata `measured_step_ns` (the
Kineto `ProfilerStep` duration) and each node's recorded `start_ns` / `dur_ns` (or
`duration_micros`). A rank without `measured_step_ns` falls back to the span of its
recorded nodes (said in `step_source`). Processors are matched by the simulator's own
assignment of nodes to processors, so "stream 7" means the same thing on both sides.

Each rank is compared with its own measured step, like with like: the simulated CPU
window (`RankResult.iteration_time_ns`) with the `ProfilerStep`, and the simulated
GPU-inclusive step with the measured one (step start to the last recorded end). The
overall figure is the slowest rank's simulated step against the slowest measured step —
never the span from the first start to the last end over ranks, which would add the
entry skew of the last-finishing rank and hide per-rank errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from lumos.simulator.report.breakdown import covered_ns, merge_intervals
from lumos.simulator.report.measured import MeasuredRank
from lumos.simulator.report.summary import MAX_ROWS, fmt_ns
from lumos.simulator.result import ProcKind, RankResult, SimResult


def _error_pct(simulated: int, measured: int | None) -> float | None:
    if not measured:
        return None
    return 100.0 * (simulated - measured) / measured


@dataclass(slots=True, frozen=True)
class ProcComparison:
    """Busy time of one stream or thread, measured and simulated."""

    name: str
    measured_busy_ns: int
    simulated_busy_ns: int
    error_pct: float | None


@dataclass(slots=True, frozen=True)
class RankComparison:
    """One rank's step, measured and simulated: the CPU window (`measured_ns` /
    `simulated_ns`, the headline) and the GPU-inclusive step; and its processors.
    `step_source`: "ProfilerStep", "recorded span" (no step was measured) or "none"."""

    rank: int
    measured_ns: int | None
    simulated_ns: int
    error_pct: float | None
    processors: tuple[ProcComparison, ...]
    measured_gpu_ns: int | None = None
    simulated_gpu_ns: int = 0
    step_source: str = "ProfilerStep"

    @property
    def gpu_error_pct(self) -> float | None:
        return _error_pct(self.simulated_gpu_ns, self.measured_gpu_ns)


@dataclass(slots=True, frozen=True)
class Comparison:
    """Simulated vs measured over all ranks; step errors are signed percentages.

    Per-rank errors come first (`worst_rank`, `max_abs_rank_error_pct`); the overall
    times are the slowest rank's on each side. `aligned`: the ranks were started at their
    measured step starts (this changes no figure here).
    """

    ranks: tuple[RankComparison, ...]
    aligned: bool = False

    @property
    def measured_ns(self) -> int | None:
        """The slowest measured step."""
        known = [r.measured_ns for r in self.ranks if r.measured_ns is not None]
        return max(known) if known else None

    @property
    def simulated_ns(self) -> int:
        """The slowest simulated step."""
        return max((r.simulated_ns for r in self.ranks), default=0)

    @property
    def overall_label(self) -> str:
        """What the overall row measures, in words (the table's last row)."""
        return "slowest rank"

    @property
    def measured(self) -> bool:
        """Whether any rank has a measured `ProfilerStep` (else errors say little)."""
        return any(r.step_source == "ProfilerStep" for r in self.ranks)

    @property
    def worst_rank(self) -> RankComparison | None:
        """The rank with the largest |error|."""
        known = [r for r in self.ranks if r.error_pct is not None]
        return max(known, key=lambda r: (abs(r.error_pct or 0.0), -r.rank)) if known else None

    @property
    def max_abs_rank_error_pct(self) -> float | None:
        worst = self.worst_rank
        return abs(worst.error_pct) if worst is not None and worst.error_pct is not None else None

    @property
    def max_abs_gpu_error_pct(self) -> float | None:
        errors = [abs(r.gpu_error_pct) for r in self.ranks if r.gpu_error_pct is not None]
        return max(errors) if errors else None

    @property
    def error_pct(self) -> float | None:
        return _error_pct(self.simulated_ns, self.measured_ns)

    @property
    def mean_abs_error_pct(self) -> float | None:
        errors = [abs(r.error_pct) for r in self.ranks if r.error_pct is not None]
        return sum(errors) / len(errors) if errors else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "measured_ns": self.measured_ns,
            "simulated_ns": self.simulated_ns,
            "error_pct": self.error_pct,
            "overall": "slowest_rank",
            "mean_abs_rank_error_pct": self.mean_abs_error_pct,
            "max_abs_rank_error_pct": self.max_abs_rank_error_pct,
            "worst_rank": None if self.worst_rank is None else self.worst_rank.rank,
            "max_abs_gpu_error_pct": self.max_abs_gpu_error_pct,
            "measured": self.measured,
            "aligned": self.aligned,
            "ranks": [
                {
                    "rank": r.rank,
                    "step_source": r.step_source,
                    "measured_ns": r.measured_ns,
                    "simulated_ns": r.simulated_ns,
                    "error_pct": r.error_pct,
                    "measured_gpu_inclusive_ns": r.measured_gpu_ns,
                    "simulated_gpu_inclusive_ns": r.simulated_gpu_ns,
                    "gpu_error_pct": r.gpu_error_pct,
                    "processors": [
                        {
                            "name": p.name,
                            "measured_busy_ns": p.measured_busy_ns,
                            "simulated_busy_ns": p.simulated_busy_ns,
                            "error_pct": p.error_pct,
                        }
                        for p in r.processors
                    ],
                }
                for r in self.ranks
            ],
        }


def _busy(start: np.ndarray, end: np.ndarray) -> int:
    return covered_ns(merge_intervals(start.astype(np.int64), end.astype(np.int64)))


def compare_rank(sim: RankResult, measured: MeasuredRank) -> RankComparison:
    """Compare one rank; rows are matched to recorded nodes by node id."""
    tasks = sim.tasks
    pos = np.searchsorted(measured.node_id, tasks.node_id)
    pos = np.clip(pos, 0, max(measured.node_id.size - 1, 0))
    found = measured.node_id.size > 0
    m_start = measured.start_ns[pos] if found else np.full(len(tasks), -1, np.int64)
    m_dur = measured.dur_ns[pos] if found else np.zeros(len(tasks), np.int64)
    if found:
        missing = measured.node_id[pos] != tasks.node_id
        m_start = np.where(missing, -1, m_start)
        m_dur = np.where(missing, 0, m_dur)
    procs = []
    for p, info in enumerate(sim.processors):
        if info.kind == ProcKind.META:
            continue
        rows = np.flatnonzero(tasks.proc == p)
        starts, durs = m_start[rows], m_dur[rows]
        measured_busy = _busy(starts, starts + durs) if (starts >= 0).all() else int(durs.sum())
        simulated_busy = _busy(tasks.start_ns[rows], tasks.end_ns[rows])
        procs.append(
            ProcComparison(
                info.name, measured_busy, simulated_busy, _error_pct(simulated_busy, measured_busy)
            )
        )
    step = measured.iteration_ns
    return RankComparison(
        sim.rank,
        step,
        sim.iteration_time_ns,
        _error_pct(sim.iteration_time_ns, step),
        tuple(procs),
        measured.gpu_inclusive_ns,
        sim.gpu_inclusive_ns,
        measured.step_source,
    )


def compare(result: SimResult, measured: Sequence[MeasuredRank]) -> Comparison:
    """Compare every simulated rank with its measured counterpart (same global rank)."""
    by_rank = {m.rank: m for m in measured}
    empty = np.zeros(0, np.int64)
    rows = []
    for sim in result.ranks:
        m = by_rank.get(sim.rank, MeasuredRank(sim.rank, None, empty, empty, empty))
        if m.step_ns is None and sim.measured_step_ns is not None:
            m = MeasuredRank(
                m.rank, sim.measured_step_ns, m.node_id, m.start_ns, m.dur_ns, m.step_start_ns
            )
        rows.append(compare_rank(sim, m))
    return Comparison(tuple(rows), result.aligned)


def render_comparison(comparison: Comparison, console: Console) -> None:
    """Print simulated vs measured step time per rank, then busy time per processor.

    With more than MAX_ROWS ranks, the ranks with the largest step errors are shown.
    """
    ranks = list(comparison.ranks)
    title = "Step time: simulated vs measured"
    if len(ranks) > MAX_ROWS:
        ranks.sort(key=lambda r: (r.error_pct is None, -abs(r.error_pct or 0.0), r.rank))
        ranks = sorted(ranks[:MAX_ROWS], key=lambda r: r.rank)
        title += f" — {MAX_ROWS} largest errors of {len(comparison.ranks)} ranks"
    steps = Table(
        title=title,
        caption="slowest rank: the largest step on each side (each rank's own error above)",
    )
    heads = (
        "rank",
        "measured",
        "simulated",
        "error",
        "GPU-incl. measured",
        "GPU-incl. sim",
        "error",
    )
    for name in heads:
        steps.add_column(name, justify="right")
    for r in ranks:
        steps.add_row(
            str(r.rank),
            fmt_ns(r.measured_ns),
            fmt_ns(r.simulated_ns),
            _fmt_pct(r.error_pct),
            fmt_ns(r.measured_gpu_ns),
            fmt_ns(r.simulated_gpu_ns),
            _fmt_pct(r.gpu_error_pct),
        )
    steps.add_section()
    worst = comparison.worst_rank
    steps.add_row(
        comparison.overall_label,
        fmt_ns(comparison.measured_ns),
        fmt_ns(comparison.simulated_ns),
        _fmt_pct(comparison.error_pct),
        "",
        "",
        "" if worst is None else f"worst rank {worst.rank}: {_fmt_pct(worst.error_pct)}",
    )
    unmeasured = [r.rank for r in comparison.ranks if r.step_source != "ProfilerStep"]
    if unmeasured:
        steps.caption = f"{steps.caption}; " + (
            f"no ProfilerStep measured on rank(s) {unmeasured[:8]}: compared with the span "
            "of their recorded nodes, which replay reproduces by construction"
        )
    console.print(steps)
    busy = Table(title="Busy time per stream / thread")
    for name in ("rank", "processor", "measured", "simulated", "error"):
        busy.add_column(name, justify="right" if name != "processor" else "left")
    for r in ranks:
        for p in r.processors:
            busy.add_row(
                str(r.rank),
                p.name,
                fmt_ns(p.measured_busy_ns),
                fmt_ns(p.simulated_busy_ns),
                _fmt_pct(p.error_pct),
            )
    console.print(busy)


def _fmt_pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f}%"
