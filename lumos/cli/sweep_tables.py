"""How `lumos sweep` shows its result in a terminal: the ranked plan table, the what-if
grid table, and the plan sweep's plots."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from lumos.simulator.sweep.runner import SweepResult
    from lumos.simulator.sweep.space import SweepSpace


def print_trace(result: SweepResult, top: int) -> None:
    from rich.table import Table

    from lumos.cli.console import table_console
    from lumos.simulator.sweep.trace_grid import AXES

    table = Table(title=f"what-if grid ({len(result.rows)} points, fastest first)")
    for col in ("#", *AXES, "ranks", "step s", "vs trace"):
        table.add_column(col, justify="right")
    for r in result.rows[: top or None]:
        edits = [str(r[a]) if r.get(a) is not None else "-" for a in AXES]
        if r.get("error"):
            table.add_row(str(r["rank"]), *edits, "", f"error: {r['error']}", "")
            continue
        speed = r.get("speedup_vs_trace")
        table.add_row(
            str(r["rank"]),
            *edits,
            str(r["ranks"]),
            f"{r['iteration_time_s']:.4f}",
            f"{speed:.2f}x" if speed else "",
        )
    console = table_console()
    console.print(table)
    console.print(
        f"simulated {result.ran}, resumed {result.resumed}, failed {result.failed} "
        f"in {result.wall_s:.1f} s -> {result.table}"
    )


def plots(rows: list[dict[str, Any]], prefix: Path, space: SweepSpace) -> list[Path]:
    from lumos.errors import MissingExtraError
    from lumos.hwconfigs.load import load_system
    from lumos.simulator.sweep.pareto import pareto_html, pareto_png

    title = f"{space.model} on {space.gpus} x {space.hw}"
    cap = load_system(space.hw).gpu.hbm_capacity_gb
    # PREFIX.html, not with_suffix: `--plot run.v2` must not become run.html
    out = [pareto_html(rows, prefix.with_name(prefix.name + ".html"), title, cap)]
    try:
        out.append(pareto_png(rows, prefix.with_name(prefix.name + ".png"), title, cap))
    except MissingExtraError as exc:
        click.echo(f"note: no PNG ({exc})", err=True)
    return out


def print_plans(result: SweepResult, top: int) -> None:
    from rich.table import Table

    from lumos.cli.console import table_console
    from lumos.simulator.sweep.space import SweepSpace, plan_label

    rows = result.rows
    software = ""
    if isinstance(result.space, SweepSpace):  # the job's software, where not the default
        parts = [result.space.framework] if result.space.framework != "megatron" else []
        parts += ["TP overlap"] if result.space.tp_comm_overlap else []
        software = f", {', '.join(parts)}" if parts else ""
    table = Table(
        title=f"best plans ({len(rows)} valid of {result.grid_points} grid points{software})"
    )
    for col in (
        "#",
        "plan",
        "tok/s/GPU",
        "step s",
        "MFU",
        "GB/GPU",
        "fits",
        "compute",
        "exp TP",
        "exp DP",
        "exp PP",
        "bubble",
    ):
        table.add_column(col, justify="left" if col == "plan" else "right")
    for r in rows[: top or None]:
        if r.get("error"):
            table.add_row(str(r["rank"]), plan_label(r), f"error: {r['error']}", *[""] * 9)
            continue
        if r.get("tokens_per_s_per_gpu") is None:
            gb = f"{r['memory_gb_per_gpu']:.1f}"
            table.add_row(str(r["rank"]), plan_label(r), "-", "-", "-", gb, "NO", *["-"] * 5)
            continue
        table.add_row(
            str(r["rank"]),
            plan_label(r),
            f"{r['tokens_per_s_per_gpu']:.0f}",
            f"{r['iteration_time_s']:.3f}",
            f"{r['mfu']:.1%}",
            f"{r['memory_gb_per_gpu']:.1f}",
            "yes" if r["fits"] else "NO",
            *(
                f"{r[k]:.3f}"
                for k in ("compute_s", "exposed_tp_s", "exposed_dp_s", "exposed_pp_s", "bubble_s")
            ),
        )
    console = table_console()
    console.print(table)
    if result.rejected:
        skipped = "; ".join(f"{k}: {v}" for k, v in sorted(result.rejected.items()))
        console.print(f"not valid: {skipped}")
    console.print(
        f"estimated {result.ran}, resumed {result.resumed}, failed {result.failed} "
        f"in {result.wall_s:.1f} s -> {result.table}"
    )
