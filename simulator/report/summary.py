"""The report of a simulated run: iteration times, per-rank breakdown, critical path.

`build_report(result)` assembles a `Report` from a `SimResult`; `Report.to_dict()` is what
`lumos simulate --json` prints (`iteration_time_ns` = the slowest rank's step, and per
rank its step — the CPU loop's window, what a `ProfilerStep` measures — its
GPU-inclusive step and the breakdown of that); `render_summary(report, console)` prints
readable rich tables for people.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lumos.outputs import printable
from lumos.simulator.report.breakdown import Breakdown, rank_breakdown
from lumos.simulator.report.critical_path import CriticalPath, critical_path
from lumos.simulator.result import SimResult

if TYPE_CHECKING:  # rich loads when a table is drawn (`--json` never draws one)
    from rich.console import Console
    from rich.table import Table

#: ranks shown in the summary table; past that, the slowest ones.
MAX_ROWS = 16
#: how each breakdown part is called in tables and pictures.
PART_LABELS = {
    "exposed_compute": "exposed compute",
    "overlapped": "overlapped",
    "exposed_transfer": "exposed transfer",
    "peer_wait": "wait for peers",
    "backlog": "GPU backlog",
    "idle": "idle (starved)",
}


@dataclass(slots=True, frozen=True)
class RankSummary:
    """One rank's line of the report."""

    rank: int
    iteration_time_ns: int
    breakdown: Breakdown
    measured_step_ns: int | None = None
    folded_from: int | None = None
    gpu_inclusive_ns: int = 0

    def to_dict(self) -> dict[str, Any]:
        parts = {f"{k}_ns": v for k, v in self.breakdown.parts().items()}
        return {
            "rank": self.rank,
            "iteration_time_ns": self.iteration_time_ns,
            "gpu_inclusive_ns": max(self.gpu_inclusive_ns, self.iteration_time_ns),
            "measured_step_ns": self.measured_step_ns,
            "folded_from": self.folded_from,
            "breakdown": {**parts, "basis": self.breakdown.basis},
        }


@dataclass(slots=True, frozen=True)
class Report:
    """Everything `lumos simulate` shows about one run."""

    mode: str
    iteration_time_ns: int
    ranks: tuple[RankSummary, ...]
    critical_path: CriticalPath | None
    top: int = 10
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def slowest_rank(self) -> int:
        return max(self.ranks, key=lambda r: (r.iteration_time_ns, -r.rank)).rank

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mode": self.mode,
            "iteration_time_ns": self.iteration_time_ns,
            "ranks": [r.to_dict() for r in self.ranks],
        }
        if self.critical_path is not None:
            out["critical_path"] = self.critical_path.to_dict(self.top)
        out["stats"] = self.stats
        return out


def build_report(result: SimResult, *, top: int = 10, with_critical_path: bool = True) -> Report:
    """Assemble the report of a run: breakdown of every rank, critical path top `top`
    (none for a run that kept no timelines: `SimResult.timelines`)."""
    ranks = tuple(
        RankSummary(
            rank=r.rank,
            iteration_time_ns=r.iteration_time_ns,
            breakdown=r.breakdown if r.breakdown is not None else rank_breakdown(r),
            measured_step_ns=r.measured_step_ns,
            folded_from=r.folded_from,
            gpu_inclusive_ns=r.gpu_inclusive_ns,
        )
        for r in result.ranks
    )
    path = critical_path(result) if with_critical_path and result.timelines else None
    return Report(result.mode, result.iteration_time_ns, ranks, path, top, dict(result.stats))


def fmt_ns(ns: int | float | None) -> str:
    """A duration in the unit that reads best (ns, µs, ms, s)."""
    if ns is None:
        return "-"
    value = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:,.3f} {unit}"
    return f"{value:,.0f} ns"


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:5.1f}%" if whole else "  -  "


def breakdown_table(report: Report) -> Table:
    """Per-rank iteration time and breakdown (the slowest MAX_ROWS ranks when many)."""
    from rich.table import Table

    rows = sorted(report.ranks, key=lambda r: r.rank)
    title = f"Simulated step ({report.mode}): {fmt_ns(report.iteration_time_ns)}"
    if len(rows) > MAX_ROWS:
        rows = sorted(rows, key=lambda r: (-r.iteration_time_ns, r.rank))[:MAX_ROWS]
        title += f" — {MAX_ROWS} slowest of {len(report.ranks)} ranks"
    table = Table(title=title)
    table.add_column("rank", justify="right")
    table.add_column("step", justify="right")
    table.add_column("GPU-incl.", justify="right")
    for name in PART_LABELS.values():
        table.add_column(name, justify="right")
    for r in rows:
        b = r.breakdown
        cells = [f"{fmt_ns(v)} {_pct(v, b.iteration_ns)}" for v in b.parts().values()]
        label = str(r.rank) + (f" (={r.folded_from})" if r.folded_from is not None else "")
        table.add_row(label, fmt_ns(r.iteration_time_ns), fmt_ns(b.iteration_ns), *cells)
    table.caption = (
        "step: the CPU loop's window (what ProfilerStep measures); the parts split the "
        "GPU-inclusive step; exposed comm = exposed transfer + wait for peers; idle = starved"
    )
    return table


def critical_path_table(path: CriticalPath, top: int) -> Table:
    """Critical path: time by category, then the top contributors by name."""
    from rich.markup import escape
    from rich.table import Table

    ranks = path.ranks
    shown = ", ".join(map(str, ranks[:8])) + (" ..." if len(ranks) > 8 else "")
    table = Table(title=f"Critical path: {fmt_ns(path.total_ns)}, through rank(s) {shown}")
    table.add_column("category / name")
    table.add_column("time", justify="right")
    table.add_column("share", justify="right")
    table.add_column("count", justify="right")
    for c in path.by_category():
        table.add_row(
            f"[bold]{c.name}[/bold]", fmt_ns(c.total_ns), f"{100 * c.share:.1f}%", str(c.count)
        )
    table.add_section()
    for c in path.by_name(top):
        name = printable(c.name)  # an op name cannot drive the terminal
        name = name if len(name) <= 60 else name[:57] + "..."
        label = f"{escape(name)} [dim]({c.category})[/dim]"
        table.add_row(label, fmt_ns(c.total_ns), f"{100 * c.share:.1f}%", str(c.count))
    return table


def render_summary(report: Report, console: Console) -> None:
    """Print the breakdown table and, when computed, the critical-path table."""
    console.print(breakdown_table(report))
    if report.critical_path is not None and report.critical_path.steps:
        console.print(critical_path_table(report.critical_path, report.top))
