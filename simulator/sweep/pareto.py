"""Throughput vs memory per GPU: the Pareto front of a sweep, as HTML and (optionally) PNG.

A plan is on the front when no other plan that fits gives more tokens/s/GPU with no more
memory. The HTML page is one self-contained file (inline SVG, no script, no extra); plans
that do not fit are drawn grey with the GPU's capacity as a line. The PNG needs the
`plot` extra (matplotlib), imported only here.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from lumos.simulator.report.plots import _pyplot
from lumos.simulator.sweep.table import write_atomic

W, H, PAD = 760, 440, 60


def pareto_front(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fitting plans no other fitting plan beats on both axes, by rising memory."""
    ok = sorted(
        (r for r in rows if not r.get("error") and r.get("fits")),
        key=lambda r: (r["memory_gb_per_gpu"], -r["tokens_per_s_per_gpu"]),
    )
    front: list[dict[str, Any]] = []
    best = float("-inf")
    for row in ok:
        if row["tokens_per_s_per_gpu"] > best:
            front.append(row)
            best = row["tokens_per_s_per_gpu"]
    return front


def _scale(lo: float, hi: float, out_lo: float, out_hi: float) -> Any:
    span = (hi - lo) or 1.0
    return lambda v: out_lo + (v - lo) / span * (out_hi - out_lo)


def pareto_html(
    rows: list[dict[str, Any]], path: Path, title: str, capacity_gb: float | None
) -> Path:
    """Write the scatter + front page; returns `path`."""
    pts = [r for r in rows if r.get("tokens_per_s_per_gpu") is not None]
    sized = [r for r in rows if r.get("tokens_per_s_per_gpu") is None and not r.get("error")]
    front = pareto_front(rows)
    mem = [r["memory_gb_per_gpu"] for r in pts + sized] + ([capacity_gb] if capacity_gb else [])
    tps = [r["tokens_per_s_per_gpu"] for r in pts]
    sx = _scale(0.0, max(mem, default=1.0) * 1.05, PAD, W - 20)
    sy = _scale(0.0, max(tps, default=1.0) * 1.05, H - PAD, 20)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}">',
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 20}" y2="{H - PAD}" stroke="#333"/>',
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{PAD}" y2="20" stroke="#333"/>',
        f'<text x="{W / 2}" y="{H - 15}" text-anchor="middle">memory per GPU (GB)</text>',
        f'<text x="15" y="{H / 2}" transform="rotate(-90 15 {H / 2})" text-anchor="middle">'
        "tokens/s/GPU</text>",
    ]
    if capacity_gb:
        x = sx(capacity_gb)
        parts.append(
            f'<line x1="{x:.1f}" y1="20" x2="{x:.1f}" y2="{H - PAD}" stroke="#999" '
            f'stroke-dasharray="4 3"/><text x="{x + 4:.1f}" y="32" fill="#666">'
            f"capacity {capacity_gb:g} GB</text>"
        )
    for r in pts:
        colour = "#4c72b0" if r.get("fits") else "#c8c8c8"
        tip = html.escape(
            f"{r['key']}: {r['tokens_per_s_per_gpu']:.0f} tok/s/GPU, "
            f"{r['memory_gb_per_gpu']:.1f} GB, step {r['iteration_time_s']:.3f} s"
        )
        parts.append(
            f'<circle cx="{sx(r["memory_gb_per_gpu"]):.1f}" '
            f'cy="{sy(r["tokens_per_s_per_gpu"]):.1f}" r="4" fill="{colour}">'
            f"<title>{tip}</title></circle>"
        )
    for r in sized:  # did not fit and was not simulated: a grey tick on the memory axis
        x = sx(r["memory_gb_per_gpu"])
        tip = html.escape(
            f"{r['key']}: {r['memory_gb_per_gpu']:.1f} GB, does not fit (not simulated)"
        )
        parts.append(
            f'<line x1="{x:.1f}" y1="{H - PAD - 8}" x2="{x:.1f}" y2="{H - PAD}" '
            f'stroke="#aaa" stroke-width="2"><title>{tip}</title></line>'
        )
    line = " ".join(
        f"{sx(r['memory_gb_per_gpu']):.1f},{sy(r['tokens_per_s_per_gpu']):.1f}" for r in front
    )
    if line:
        parts.append(f'<polyline points="{line}" fill="none" stroke="#c44e52" stroke-width="2"/>')
    for tick in range(6):
        gb = max(mem, default=1.0) * 1.05 * tick / 5
        tok = max(tps, default=1.0) * 1.05 * tick / 5
        parts.append(
            f'<text x="{sx(gb):.1f}" y="{H - PAD + 16}" text-anchor="middle" '
            f'font-size="11">{gb:.0f}</text>'
        )
        parts.append(
            f'<text x="{PAD - 6}" y="{sy(tok) + 4:.1f}" text-anchor="end" '
            f'font-size="11">{tok:.0f}</text>'
        )
    parts.append("</svg>")
    rows_html = "".join(
        f"<tr><td>{html.escape(r['key'])}</td><td>{r['tokens_per_s_per_gpu']:.0f}</td>"
        f"<td>{r['memory_gb_per_gpu']:.1f}</td><td>{r['iteration_time_s']:.3f}</td></tr>"
        for r in front
    )
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 10px;text-align:right}"
        "td:first-child{text-align:left}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p>{len(pts)} plans simulated; blue fit in memory, grey "
        f"do not; {len(sized)} more do not fit and were only sized (grey ticks on the memory "
        "axis). The red line is the Pareto front (no fitting plan is faster with less memory)."
        f"</p>{''.join(parts)}<h2>Pareto front</h2><table><tr><th>plan</th><th>tokens/s/GPU"
        f"</th><th>GB/GPU</th><th>step (s)</th></tr>{rows_html}</table></body></html>"
    )
    write_atomic(path, page.encode())
    return path


def pareto_png(
    rows: list[dict[str, Any]], path: Path, title: str, capacity_gb: float | None
) -> Path:
    """The same picture as a PNG (needs the `plot` extra)."""
    plt = _pyplot()
    pts = [r for r in rows if r.get("tokens_per_s_per_gpu") is not None]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for fits, colour, label in ((True, "#4c72b0", "fits"), (False, "#c8c8c8", "does not fit")):
        sel = [r for r in pts if bool(r.get("fits")) == fits]
        ax.scatter(
            [r["memory_gb_per_gpu"] for r in sel],
            [r["tokens_per_s_per_gpu"] for r in sel],
            s=14,
            color=colour,
            label=label,
        )
    front = pareto_front(rows)
    ax.plot(
        [r["memory_gb_per_gpu"] for r in front],
        [r["tokens_per_s_per_gpu"] for r in front],
        color="#c44e52",
        label="Pareto front",
    )
    if capacity_gb:
        ax.axvline(capacity_gb, color="#999", linestyle="--", linewidth=1)
    ax.set_xlabel("memory per GPU (GB)")
    ax.set_ylabel("tokens/s/GPU")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
