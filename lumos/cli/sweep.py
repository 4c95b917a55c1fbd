"""`lumos sweep`: search the parallel-plan space of a training job and rank the plans."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from lumos.cli.main import echo_json, handle_errors
from lumos.cli.options import hw_option
from lumos.errors import ConfigError

if TYPE_CHECKING:
    from lumos.simulator.sweep.runner import SweepResult
    from lumos.simulator.sweep.space import SweepSpace


def _ints(value: str, name: str) -> tuple[int, ...]:
    try:
        out = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise ConfigError(f"--{name}: expected comma-separated integers, got {value!r}") from None
    if not out:
        raise ConfigError(f"--{name}: empty list")
    return out


def _words(value: str) -> tuple[str, ...]:
    return tuple(v.strip().lower() for v in value.split(",") if v.strip())


class _Progress:
    """A bar with ETA on a terminal; a plain line every 10 s otherwise."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.t0 = time.monotonic()
        self.last = 0.0
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if not self.tty and now - self.last < 10 and done < total:
            return
        self.last = now
        rate = done / max(now - self.t0, 1e-9)
        eta = (total - done) / rate if rate else 0.0
        line = f"sweep: {done}/{total} plans, {rate:.1f}/s, ETA {eta:.0f} s"
        click.echo(("\r" + line) if self.tty else line, err=True, nl=not self.tty or done == total)


@click.command("sweep")
@click.option("--model", required=True, help="Built-in model name or a model YAML.")
@click.option("--gpus", required=True, type=click.IntRange(min=1), help="GPUs in the job.")
@click.option("--gbs", required=True, type=click.IntRange(min=1), help="Global batch (sequences).")
@click.option("--seq", required=True, type=click.IntRange(min=1), help="Sequence length.")
@hw_option("System to estimate on.", default="h100")
@click.option("--tp", default="1,2,4,8", help="TP degrees to try.")
@click.option("--pp", default="1,2,4,8", help="PP degrees to try.")
@click.option("--cp", default="1", help="CP degrees to try.")
@click.option("--vp", default="1", help="Virtual stages per PP rank to try (interleaved 1F1B).")
@click.option("--mbs", default="1,2", help="Micro-batch sizes to try.")
@click.option("--zero", default="1", help="ZeRO stages to try (0, 1, 3).")
@click.option("--recompute", default="none,selective,full", help="Activation recomputation.")
@click.option("--precision", default="bf16", help="bf16 and/or fp8.")
@click.option(
    "--simulate-infeasible",
    is_flag=True,
    help="Also simulate plans that do not fit in GPU memory (default: size them only).",
)
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local")
@click.option("--workers", type=click.IntRange(min=1), default=2, help="Plans estimated at once.")
@click.option(
    "--ray-address",
    default=None,
    help="Ray cluster (ray://host:port or auto); default: start a local one.",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="Results table (.csv, or .parquet with lumos[parquet]); the journal sits beside it.",
)
@click.option(
    "--plot",
    "plot_prefix",
    default=None,
    help="Write PREFIX.html (and PREFIX.png with lumos[plot]).",
)
@click.option("--top", default=10, show_default=True, help="Plans shown (and in --json; 0 = all).")
@click.option("--json", "as_json", is_flag=True, help="Print the ranked plans as JSON.")
@handle_errors
def sweep_command(
    model: str,
    gpus: int,
    gbs: int,
    seq: int,
    hw: str,
    tp: str,
    pp: str,
    cp: str,
    vp: str,
    mbs: str,
    zero: str,
    recompute: str,
    precision: str,
    simulate_infeasible: bool,
    executor: str,
    workers: int,
    ray_address: str | None,
    output: str,
    plot_prefix: str | None,
    top: int,
    as_json: bool,
) -> None:
    """Estimate every valid TP/PP/CP/DP/micro-batch/recompute plan of MODEL on GPUS and rank
    them by tokens/s/GPU. Resumes from OUTPUT's journal after a kill."""
    from lumos.simulator.sweep.runner import sweep
    from lumos.simulator.sweep.space import SweepSpace

    space = SweepSpace(
        model=model,
        gpus=gpus,
        gbs=gbs,
        seq=seq,
        hw=hw,
        tp=_ints(tp, "tp"),
        pp=_ints(pp, "pp"),
        cp=_ints(cp, "cp"),
        vp=_ints(vp, "vp"),
        mbs=_ints(mbs, "mbs"),
        zero=_ints(zero, "zero"),
        recompute=_words(recompute),
        precision=_words(precision),
    )
    result = sweep(
        space,
        output,
        simulate_infeasible=simulate_infeasible,
        executor=executor,
        workers=workers,
        ray_address=ray_address,
        progress=_Progress(quiet=as_json),
    )
    if plot_prefix:
        result.plots = _plots(result.rows, Path(plot_prefix), space)
    if as_json:
        payload = result.to_json(top or None)
        echo_json(payload, timings=payload.pop("timing", None))
        return
    _print(result, top)


def _plots(rows: list[dict[str, Any]], prefix: Path, space: SweepSpace) -> list[Path]:
    from lumos.errors import MissingExtraError
    from lumos.hwconfigs.load import load_system
    from lumos.simulator.sweep.pareto import pareto_html, pareto_png

    title = f"{space.model} on {space.gpus} x {space.hw}"
    cap = load_system(space.hw).gpu.hbm_capacity_gb
    out = [pareto_html(rows, prefix.with_suffix(".html"), title, cap)]
    try:
        out.append(pareto_png(rows, prefix.with_suffix(".png"), title, cap))
    except MissingExtraError as exc:
        click.echo(f"note: no PNG ({exc})", err=True)
    return out


def _print(result: SweepResult, top: int) -> None:
    from rich.console import Console
    from rich.table import Table

    rows = result.rows
    table = Table(title=f"best plans ({len(rows)} valid of {result.grid_points} grid points)")
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
        table.add_column(col, justify="right")
    for r in rows[: top or None]:
        if r.get("error"):
            table.add_row(str(r["rank"]), r["key"], f"error: {r['error']}", *[""] * 9)
            continue
        if r.get("tokens_per_s_per_gpu") is None:
            gb = f"{r['memory_gb_per_gpu']:.1f}"
            table.add_row(str(r["rank"]), r["key"], "-", "-", "-", gb, "NO", *["-"] * 5)
            continue
        table.add_row(
            str(r["rank"]),
            r["key"],
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
    console = Console()
    console.print(table)
    if result.rejected:
        skipped = "; ".join(f"{k}: {v}" for k, v in sorted(result.rejected.items()))
        console.print(f"not valid: {skipped}")
    console.print(
        f"estimated {result.ran}, resumed {result.resumed}, failed {result.failed} "
        f"in {result.wall_s:.1f} s -> {result.table}"
    )
