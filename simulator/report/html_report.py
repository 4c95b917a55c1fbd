"""The HTML report of a simulated run: one self-contained file, no scripts, no downloads.

It states what was simulated (inputs, mode, hardware, lumos version), draws each rank's
breakdown as a stacked bar (the parts add up to the rank's GPU-inclusive step, words
and colours from `summary.PART_LABELS` / `plots.COLOURS`), the timeline of the slowest
rank as an inline SVG labelled as such (one row per processor, compute / communication
/ host colours, a legend), and the critical path's top contributors.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from lumos import __version__
from lumos.outputs import atomic_write
from lumos.simulator.report.summary import PART_LABELS, Report, fmt_ns
from lumos.simulator.result import ProcKind, RankResult, SimResult

COLOURS = {
    "exposed_compute": "#4c72b0",
    "overlapped": "#55a868",
    "exposed_transfer": "#c44e52",
    "peer_wait": "#dd8452",
    "backlog": "#937860",
    "idle": "#c8c8c8",
}
TASK_COLOURS = {"GPU compute": "#4c72b0", "communication": "#c44e52", "host (CPU)": "#8172b2"}
#: most slices drawn in the SVG timeline; past that, the longest ones
MAX_SVG_TASKS = 20_000
_W, _ROW = 1000, 18
esc = html.escape


def _bars(report: Report) -> str:
    longest = max((r.breakdown.iteration_ns for r in report.ranks), default=0) or 1
    slowest = report.slowest_rank
    rows = []
    for r in sorted(report.ranks, key=lambda r: r.rank):
        segs = "".join(
            f'<span style="width:{100 * v / longest:.3f}%;background:{COLOURS.get(k, "#999")}" '
            f'title="{esc(PART_LABELS.get(k, k))}: {esc(fmt_ns(v))}"></span>'
            for k, v in r.breakdown.parts().items()
            if v
        )
        mark = " (slowest)" if r.rank == slowest else ""
        rows.append(
            f"<tr><td>{r.rank}{mark}</td><td>{esc(fmt_ns(r.iteration_time_ns))}</td>"
            f"<td>{esc(fmt_ns(r.breakdown.iteration_ns))}</td>"
            f'<td class="bar">{segs}</td></tr>'
        )
    legend = " ".join(
        f'<span class="key" style="background:{c}"></span>{esc(PART_LABELS.get(k, k))}'
        for k, c in COLOURS.items()
    )
    return (
        f"<p>{legend}</p><table><tr><th>rank</th><th>step</th><th>GPU-incl.</th>"
        f"<th>breakdown (stacked, same scale for every rank)</th></tr>{''.join(rows)}</table>"
    )


def _timeline_svg(rank: RankResult) -> str:
    """One row per processor; slices coloured by what they are; time axis in ms."""
    t, procs = rank.tasks, rank.processors
    shown = [p for p, info in enumerate(procs) if info.kind != ProcKind.META]
    rows = np.flatnonzero((t.end_ns > t.start_ns) & np.isin(t.proc, shown))
    if rows.size > MAX_SVG_TASKS:
        rows = rows[np.argsort(t.end_ns[rows] - t.start_ns[rows])[-MAX_SVG_TASKS:]]
    lo = int(t.start_ns[rows].min()) if rows.size else 0
    hi = int(t.end_ns[rows].max()) if rows.size else 1
    scale = _W / max(hi - lo, 1)
    line = {p: i for i, p in enumerate(shown)}
    parts = []
    for p in shown:
        y = line[p] * _ROW
        parts.append(f'<text x="-6" y="{y + 13}" text-anchor="end">{esc(procs[p].name)}</text>')
    for row in rows.tolist():
        p = int(t.proc[row])
        if bool(t.is_comm[row]):
            colour = TASK_COLOURS["communication"]
        elif procs[p].kind == ProcKind.CPU:
            colour = TASK_COLOURS["host (CPU)"]
        else:
            colour = TASK_COLOURS["GPU compute"]
        x = (int(t.start_ns[row]) - lo) * scale
        w = max((int(t.end_ns[row]) - int(t.start_ns[row])) * scale, 0.3)
        parts.append(
            f'<rect x="{x:.2f}" y="{line[p] * _ROW + 2}" width="{w:.2f}" height="{_ROW - 4}" '
            f'fill="{colour}"><title>{esc(t.name(row))}: '
            f"{esc(fmt_ns(int(t.end_ns[row] - t.start_ns[row])))}</title></rect>"
        )
    height = len(shown) * _ROW
    for k in range(5):
        x = _W * k / 4
        ms = (hi - lo) * k / 4 / 1e6
        parts.append(f'<text x="{x:.0f}" y="{height + 14}" text-anchor="middle">{ms:.2f} ms</text>')
    legend = " ".join(
        f'<span class="key" style="background:{c}"></span>{esc(k)}' for k, c in TASK_COLOURS.items()
    )
    return (
        f"<p>{legend}</p>"
        f'<svg viewBox="-160 -4 {_W + 180} {height + 24}" width="100%" '
        f'xmlns="http://www.w3.org/2000/svg" font-size="11">{"".join(parts)}</svg>'
    )


def report_html(
    report: Report,
    result: SimResult,
    path: str | Path,
    context: Mapping[str, str] | None = None,
) -> Path:
    """Write the report page to `path`. `context`: what was simulated, shown at the top
    (e.g. inputs, hardware), besides the mode and lumos version it always states."""
    facts = {"mode": report.mode, **(context or {}), "lumos": __version__}
    head = "".join(f"<tr><th>{esc(k)}</th><td>{esc(str(v))}</td></tr>" for k, v in facts.items())
    slowest = result.rank(report.slowest_rank) if result.ranks else None
    timeline = ""
    if slowest is not None:
        timeline = (
            f"<h2>Timeline of the slowest rank: rank {slowest.rank} "
            f"({esc(fmt_ns(slowest.iteration_time_ns))})</h2>{_timeline_svg(slowest)}"
        )
    path_rows = ""
    if report.critical_path is not None:
        path_rows = "".join(
            f"<tr><td>{esc(c.name)}</td><td>{esc(c.category)}</td>"
            f"<td>{esc(fmt_ns(c.total_ns))}</td><td>{100 * c.share:.1f}%</td></tr>"
            for c in report.critical_path.by_name(report.top)
        )
    notes = "".join(f"<li>{esc(n)}</li>" for n in result.notes)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>lumos: simulated step</title>
<style>
body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}}
td,th{{padding:2px 8px;text-align:left}} td.bar{{width:60vw}}
td.bar span{{display:inline-block;height:14px}}
.key{{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px}}
</style></head><body>
<h1>Simulated step ({esc(report.mode)}): {esc(fmt_ns(report.iteration_time_ns))}</h1>
<table class="facts">{head}</table>
<ul class="notes">{notes}</ul>
<h2>Breakdown per rank</h2>
<p>step: the CPU loop's window (what ProfilerStep measures); the bars split the
GPU-inclusive step; idle means starved.</p>
{_bars(report)}
{timeline}
<h2>Critical path: top contributors</h2>
<table><tr><th>name</th><th>category</th><th>time</th><th>share</th></tr>{path_rows}</table>
</body></html>
"""
    out = Path(path)
    with atomic_write(out) as f:
        f.write(page.encode("utf-8"))
    return out
