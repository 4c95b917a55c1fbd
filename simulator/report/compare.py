"""Simulated vs measured: step time per rank and busy time per stream and thread.

The measured side comes from the ETs themselves: GlobalMetadata `measured_step_ns` (the
Kineto `ProfilerStep` duration) and each node's recorded `start_ns` / `dur_ns` (or
`duration_micros`). A rank without `measured_step_ns` falls back to the span of its
recorded nodes. Processors are matched by the simulator's own assignment of nodes to
processors, so "stream 7" means the same thing on both sides.
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
    """One rank's step time, measured and simulated, and its processors."""

    rank: int
    measured_ns: int | None
    simulated_ns: int
    error_pct: float | None
    processors: tuple[ProcComparison, ...]


@dataclass(slots=True, frozen=True)
class Comparison:
    """Simulated vs measured over all ranks; step errors are signed percentages.

    Overall times are those of the slowest rank (the measured and simulated slowest
    may differ), or, when the ranks were aligned on their measured step starts
    (`aligned`), last end minus first start over all ranks on each side
    (`span_measured_ns` / `span_simulated_ns`); `overall_label` says which, and
    `to_dict()["overall"]` is "span" or "slowest_rank".
    """

    ranks: tuple[RankComparison, ...]
    aligned: bool = False
    span_measured_ns: int | None = None
    span_simulated_ns: int | None = None

    @property
    def measured_ns(self) -> int | None:
        if self.aligned:
            return self.span_measured_ns
        known = [r.measured_ns for r in self.ranks if r.measured_ns is not None]
        return max(known) if known else None

    @property
    def simulated_ns(self) -> int:
        if self.aligned and self.span_simulated_ns is not None:
            return self.span_simulated_ns
        return max((r.simulated_ns for r in self.ranks), default=0)

    @property
    def overall_label(self) -> str:
        """What the overall row measures, in words (the table's last row)."""
        return "all ranks (span)" if self.aligned else "slowest rank"

    @property
    def max_abs_rank_error_pct(self) -> float | None:
        errors = [abs(r.error_pct) for r in self.ranks if r.error_pct is not None]
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
            "overall": "span" if self.aligned else "slowest_rank",
            "mean_abs_rank_error_pct": self.mean_abs_error_pct,
            "max_abs_rank_error_pct": self.max_abs_rank_error_pct,
            "aligned": self.aligned,
            "ranks": [
                {
                    "rank": r.rank,
                    "measured_ns": r.measured_ns,
                    "simulated_ns": r.simulated_ns,
                    "error_pct": r.error_pct,
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
        sim.rank, step, sim.iteration_time_ns, _error_pct(sim.iteration_time_ns, step), tuple(procs)
    )


def compare(result: SimResult, measured: Sequence[MeasuredRank]) -> Comparison:
    """Compare every simulated rank with its measured counterpart (same global rank)."""
    by_rank = {m.rank: m for m in measured}
    empty = np.zeros(0, np.int64)
    rows = []
    spans: list[tuple[int, int]] = []
    for sim in result.ranks:
        m = by_rank.get(sim.rank, MeasuredRank(sim.rank, None, empty, empty, empty))
        if m.step_ns is None and sim.measured_step_ns is not None:
            m = MeasuredRank(
                m.rank, sim.measured_step_ns, m.node_id, m.start_ns, m.dur_ns, m.step_start_ns
            )
        rows.append(compare_rank(sim, m))
        if m.step_start_ns is not None and m.iteration_ns is not None:
            spans.append((m.step_start_ns, m.step_start_ns + m.iteration_ns))
    if not result.aligned or len(spans) != len(result.ranks):
        return Comparison(tuple(rows))
    measured_span = max(e for _, e in spans) - min(s for s, _ in spans)
    return Comparison(tuple(rows), True, measured_span, result.iteration_time_ns)


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
    caption = (
        "all ranks (span): first rank start to last rank end, on each side"
        if comparison.aligned
        else "slowest rank: the largest step time on each side"
    )
    steps = Table(title=title, caption=caption)
    for name in ("rank", "measured", "simulated", "error"):
        steps.add_column(name, justify="right")
    for r in ranks:
        steps.add_row(
            str(r.rank), fmt_ns(r.measured_ns), fmt_ns(r.simulated_ns), _fmt_pct(r.error_pct)
        )
    steps.add_section()
    steps.add_row(
        comparison.overall_label,
        fmt_ns(comparison.measured_ns),
        fmt_ns(comparison.simulated_ns),
        _fmt_pct(comparison.error_pct),
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
