"""`lumos sweep`: search the parallel-plan space of a training job and rank the plans."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from lumos.cli.main import echo_json, handle_errors
from lumos.cli.options import (
    GLOBAL_BATCH,
    BadOption,
    Bounded,
    InputPath,
    force_option,
    framework_option,
    hw_option,
)
from lumos.cli.sweep_tables import plots, print_plans, print_trace
from lumos.errors import ConfigError
from lumos.limits import MAX_RANKS, MAX_SWEEP_POINTS, MAX_WORKERS

if TYPE_CHECKING:
    from lumos.simulator.sweep.runner import SweepResult


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
        line = f"sweep: {done}/{total} points, {rate:.1f}/s, ETA {eta:.0f} s"
        click.echo(("\r" + line) if self.tty else line, err=True, nl=not self.tty or done == total)


#: the model-mode grid when an axis is not given
PLAN_DEFAULTS = {
    "tp": "1,2,4,8",
    "pp": "1,2,4,8",
    "cp": "1",
    "vp": "1",
    "mbs": "1,2",
    "ep": "1",
    "zero": "1",
    "recompute": "none,selective,full",
    "precision": "bf16",
}


@click.command("sweep")
@click.option("--model", help="Built-in model name or a model YAML (plan sweep).")
@click.option(
    "--from-trace",
    "trace",
    type=InputPath(exists=True),
    help="Sweep what-if edits of this converted trace instead of plans.",
)
@click.option("--gpus", type=Bounded(1, MAX_RANKS), help="GPUs in the job (plan sweep).")
@click.option("--gbs", type=GLOBAL_BATCH, help="Global batch in sequences (plan sweep).")
@click.option("--seq", help="Sequence length; with --from-trace, lengths to try.")
@hw_option("System to estimate on (default h100); with --from-trace, the system to swap to.")
@click.option("--base-hw", help="With --from-trace and --hw: the system the trace was recorded on.")
@click.option("--tp", help=f"TP degrees to try [{PLAN_DEFAULTS['tp']}].")
@click.option("--pp", help=f"PP degrees to try [{PLAN_DEFAULTS['pp']}]; with --from-trace, stages.")
@click.option("--cp", help="CP degrees to try [1].")
@click.option("--vp", help="Virtual stages per PP rank to try (interleaved 1F1B) [1].")
@click.option("--mbs", help=f"Micro-batch sizes to try [{PLAN_DEFAULTS['mbs']}].")
@click.option("--ep", help="Expert-parallel degrees to try (mixture-of-experts models) [1].")
@click.option("--zero", help="ZeRO stages to try (0, 1, 2, 3) [1].")
@click.option(
    "--recompute",
    help="Activation recomputation (auto: per plan, the least that fits in memory) "
    f"[{PLAN_DEFAULTS['recompute']}].",
)
@click.option("--precision", help="bf16 and/or fp8 [bf16].")
@framework_option
@click.option(
    "--tp-overlap", is_flag=True, help="Overlap TP communication with the GEMMs (plan sweep)."
)
@click.option("--dp", help="With --from-trace: data-parallel degrees to try.")
@click.option("--layers", help="With --from-trace: layer counts to try.")
@click.option("--hidden", help="With --from-trace: hidden sizes to try.")
@click.option(
    "--schedule",
    type=click.Choice(["1f1b", "interleaved", "gpipe"]),
    default="1f1b",
    help="With --from-trace and --pp: the pipeline schedule.",
)
@click.option(
    "--simulate-infeasible",
    is_flag=True,
    help="Also simulate plans that do not fit in GPU memory (default: size them only).",
)
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local")
@click.option(
    "--workers", type=Bounded(1, MAX_WORKERS), default=2, help="Points simulated at once."
)
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
    help="Results table (.csv, or .parquet with lumos[parquet]); the journal sits beside it. "
    "A file no sweep wrote is replaced only with --force.",
)
@click.option(
    "--plot",
    "plot_prefix",
    default=None,
    help="Write PREFIX.html (and PREFIX.png with lumos[plot]).",
)
@click.option(
    "--top",
    type=Bounded(0, MAX_SWEEP_POINTS),
    default=10,
    show_default=True,
    help="Rows shown (and in --json; 0 = all).",
)
@force_option
@click.option("--json", "as_json", is_flag=True, help="Print the ranked rows as JSON.")
@handle_errors
def sweep_command(
    model: str | None,
    trace: str | None,
    gpus: int | None,
    gbs: int | None,
    seq: str | None,
    hw: str | None,
    base_hw: str | None,
    tp: str | None,
    pp: str | None,
    cp: str | None,
    vp: str | None,
    mbs: str | None,
    ep: str | None,
    zero: str | None,
    recompute: str | None,
    precision: str | None,
    framework: str,
    tp_overlap: bool,
    dp: str | None,
    layers: str | None,
    hidden: str | None,
    schedule: str,
    simulate_infeasible: bool,
    executor: str,
    workers: int,
    ray_address: str | None,
    output: str,
    plot_prefix: str | None,
    top: int,
    force: bool,
    as_json: bool,
) -> None:
    """Estimate every valid TP/PP/CP/DP/micro-batch/recompute plan of MODEL on GPUS and rank
    them by tokens/s/GPU; or, with --from-trace, simulate a grid of what-if edits of a
    traced step. Resumes from OUTPUT's journal after a kill."""
    from lumos.simulator.sweep.runner import sweep, sweep_trace

    for flag, value in (("-o", output), ("--plot", plot_prefix)):
        if value is not None and not value.strip():
            raise BadOption("an empty path; give a file name", param_hint=f"'{flag}'")
    progress = _Progress(quiet=as_json)
    if trace is not None:
        from lumos.simulator.sweep.trace_grid import TraceSpace

        plan_only = {
            "--model": model,
            "--gpus": gpus,
            "--gbs": gbs,
            "--tp": tp,
            "--cp": cp,
            "--mbs": mbs,
            "--zero": zero,
            "--recompute": recompute,
            "--precision": precision,
            "--framework": None if framework == "megatron" else framework,
            "--tp-overlap": tp_overlap or None,
        }
        given = [k for k, v in plan_only.items() if v is not None]
        if given:
            raise ConfigError(f"{', '.join(given)}: plan-sweep options, not for --from-trace")
        tspace = TraceSpace(
            target=trace,
            layers=_ints(layers, "layers") if layers else (),
            seq=_ints(seq, "seq") if seq else (),
            hidden=_ints(hidden, "hidden") if hidden else (),
            dp=_ints(dp, "dp") if dp else (),
            pp=_ints(pp, "pp") if pp else (),
            hw=(hw,) if hw else (),
            schedule=schedule,
            base_hw=base_hw,
        )
        result = sweep_trace(
            tspace,
            output,
            executor=executor,
            workers=workers,
            ray_address=ray_address,
            progress=progress,
            force=force,
        )
        if as_json:
            _echo(result, top)
        else:
            print_trace(result, top)
        return
    from lumos.simulator.sweep.space import SweepSpace

    missing = [
        k
        for k, v in {"--model": model, "--gpus": gpus, "--gbs": gbs, "--seq": seq}.items()
        if v is None
    ]
    if missing:
        raise ConfigError(f"a plan sweep needs {', '.join(missing)} (or use --from-trace ET_DIR)")
    given = [k for k, v in {"--dp": dp, "--layers": layers, "--hidden": hidden}.items() if v]
    if given:
        raise ConfigError(f"{', '.join(given)}: what-if options, only with --from-trace")
    assert model is not None and gpus is not None and gbs is not None and seq is not None
    if len(_ints(seq, "seq")) > 1:
        raise ConfigError(f"--seq {seq!r}: a plan sweep takes one sequence length")
    grid = {
        k: v if v is not None else PLAN_DEFAULTS[k]
        for k, v in {
            "tp": tp,
            "pp": pp,
            "cp": cp,
            "vp": vp,
            "mbs": mbs,
            "ep": ep,
            "zero": zero,
            "recompute": recompute,
            "precision": precision,
        }.items()
    }
    space = SweepSpace(
        model=model,
        gpus=gpus,
        gbs=gbs,
        seq=_ints(seq, "seq")[0],
        hw=hw or "h100",
        tp=_ints(grid["tp"], "tp"),
        pp=_ints(grid["pp"], "pp"),
        cp=_ints(grid["cp"], "cp"),
        vp=_ints(grid["vp"], "vp"),
        mbs=_ints(grid["mbs"], "mbs"),
        ep=_ints(grid["ep"], "ep"),
        zero=_ints(grid["zero"], "zero"),
        recompute=_words(grid["recompute"]),
        precision=_words(grid["precision"]),
        framework=framework,
        tp_comm_overlap=tp_overlap,
    )
    result = sweep(
        space,
        output,
        simulate_infeasible=simulate_infeasible,
        executor=executor,
        workers=workers,
        ray_address=ray_address,
        progress=progress,
        force=force,
    )
    if plot_prefix:
        result.plots = plots(result.rows, Path(plot_prefix), space)
    if as_json:
        _echo(result, top)
        return
    print_plans(result, top)


def _echo(result: SweepResult, top: int) -> None:
    payload = result.to_json(top or None)
    echo_json(payload, timings=payload.pop("timing", None))
