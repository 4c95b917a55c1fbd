"""Pictures of a simulated run: the per-rank breakdown and a Gantt timeline of one rank.

PNGs need matplotlib (the `plot` extra), imported only here and only when asked for; a
missing install raises MissingExtraError naming the extra. The HTML report
(`html_report`: what was simulated, breakdown bars, the slowest rank's timeline, the
critical path) needs nothing beyond the standard library, so it is always written and
is the fallback where matplotlib cannot be installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from lumos.errors import MissingExtraError
from lumos.outputs import atomic_write
from lumos.simulator.report.html_report import COLOURS, report_html
from lumos.simulator.report.summary import PART_LABELS, Report, fmt_ns
from lumos.simulator.result import ProcKind, SimResult

_TASK_COLOURS = {"compute": "#4c72b0", "comm": "#c44e52", "cpu": "#8172b2"}
#: most tasks drawn in one Gantt chart; past that, the longest ones.
MAX_GANTT_TASKS = 200_000


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingExtraError("matplotlib", "plot") from None
    return plt


def breakdown_png(report: Report, path: str | Path) -> Path:
    """Stacked bar per rank of the breakdown's parts (ms): exposed compute, overlapped,
    exposed transfer, wait for peers, GPU backlog, idle."""
    plt = _pyplot()
    ranks = sorted(report.ranks, key=lambda r: r.rank)
    x = np.arange(len(ranks))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.25 * len(ranks) + 2), 4.0))
    bottom = np.zeros(len(ranks))
    for part, colour in COLOURS.items():
        values = np.array([r.breakdown.parts()[part] for r in ranks], dtype=float) / 1e6
        ax.bar(x, values, bottom=bottom, color=colour, label=PART_LABELS[part])
        bottom += values
    ax.set_xticks(x, [str(r.rank) for r in ranks], fontsize=7 if len(ranks) > 32 else 9)
    ax.set_xlabel("rank")
    ax.set_ylabel("ms")
    ax.set_title(f"Simulated step ({report.mode}): {fmt_ns(report.iteration_time_ns)}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    out = Path(path)
    try:
        with atomic_write(out) as f:
            fig.savefig(f, dpi=120, format="png")
    finally:
        plt.close(fig)
    return out


def timeline_png(result: SimResult, path: str | Path, rank: int | None = None) -> Path:
    """Gantt chart of one rank (the slowest by default): one row per processor."""
    plt = _pyplot()
    chosen = (
        max(result.ranks, key=lambda r: r.iteration_time_ns) if rank is None else result.rank(rank)
    )
    tasks, procs = chosen.tasks, chosen.processors
    rows = np.flatnonzero(tasks.end_ns > tasks.start_ns)
    if rows.size > MAX_GANTT_TASKS:
        longest = np.argsort(tasks.end_ns[rows] - tasks.start_ns[rows])[-MAX_GANTT_TASKS:]
        rows = rows[longest]
    fig, ax = plt.subplots(figsize=(12.0, 0.45 * len(procs) + 1.5))
    for p, info in enumerate(procs):
        mine = rows[tasks.proc[rows] == p]
        if mine.size == 0:
            continue
        start = tasks.start_ns[mine] / 1e6
        width = (tasks.end_ns[mine] - tasks.start_ns[mine]) / 1e6
        comm = tasks.is_comm[mine].astype(bool)
        base = "cpu" if info.kind == ProcKind.CPU else "compute"
        colours = np.where(comm, _TASK_COLOURS["comm"], _TASK_COLOURS[base])
        ax.broken_barh(list(zip(start, width, strict=True)), (p - 0.4, 0.8), facecolors=colours)
    ax.set_yticks(range(len(procs)), [p.name for p in procs])
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    ax.set_title(f"rank {chosen.rank}: {fmt_ns(chosen.iteration_time_ns)}")
    fig.tight_layout()
    out = Path(path)
    try:
        with atomic_write(out) as f:
            fig.savefig(f, dpi=120, format="png")
    finally:
        plt.close(fig)
    return out


def write_plots(
    report: Report,
    result: SimResult,
    out_prefix: str | Path,
    *,
    png: bool = True,
    context: Mapping[str, str] | None = None,
) -> list[Path]:
    """Write `<prefix>.breakdown.html` (the report page, `html_report`; `context` says
    what was simulated) and, with `png`, `<prefix>.breakdown.png` and
    `<prefix>.timeline.png`; returns the paths written.

    Raises MissingExtraError if `png` and matplotlib is not installed (the HTML page is
    written first, so it is there either way); OutputError if a file cannot be written
    (then none of them is left).
    """
    prefix = str(out_prefix)
    written = [report_html(report, result, prefix + ".breakdown.html", context)]
    try:
        if png:
            written.append(breakdown_png(report, prefix + ".breakdown.png"))
            written.append(timeline_png(result, prefix + ".timeline.png"))
    except MissingExtraError:
        raise
    except BaseException:
        for path in written:  # all or nothing: a full disk leaves no half set of plots
            path.unlink(missing_ok=True)
        raise
    return written
