"""`lumos compare`: replay a trace and put simulated and measured times side by side."""

from __future__ import annotations

import click
from rich.console import Console

from lumos.cli.main import echo_json, handle_errors, quiet
from lumos.cli.options import hw_option, json_option, trace_argument
from lumos.cli.progress import shown
from lumos.converters.chakra.files import find_et_sources
from lumos.simulator.network.api import CollectivePricer
from lumos.simulator.report.compare import compare, render_comparison
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import Mode, SimOptions, simulate


def _pricer(hw: str | None, ranks: int) -> CollectivePricer | None:
    """The network pricer for collectives without a recorded time (only with --hw)."""
    if hw is None:
        return None
    from lumos.simulator.network.nccl import pricer_for_job

    return pricer_for_job(hw, ranks)


@click.command("compare")
@trace_argument()
@hw_option("System pricing the collectives that have no recorded time (replay keeps the rest).")
@click.option("--ablate-sync", is_flag=True, help="Drop cross-stream and sync edges (dPRO-like).")
@click.option(
    "--repair", is_flag=True, help="Load broken foreign ETs anyway (drop dangling/cyclic deps)."
)
@click.option(
    "--no-align-ranks",
    is_flag=True,
    help="Start every rank at 0 instead of at its measured step start (step_start_ns).",
)
@json_option
@handle_errors
def compare_command(
    trace: str,
    hw: str | None,
    ablate_sync: bool,
    repair: bool,
    no_align_ranks: bool,
    as_json: bool,
) -> None:
    """Replay TRACE and compare with the times recorded in it.

    Measured step = the ETs' `measured_step_ns` (Kineto ProfilerStep), else the span of
    the recorded nodes; per stream/thread, busy time recorded vs simulated. Ranks start
    at their measured step starts when the ETs carry them (overall times are then last
    end minus first start on both sides).
    """
    ranks = len(find_et_sources(trace))
    options = SimOptions(
        mode=Mode.REPLAY,
        pricer=_pricer(hw, ranks),
        ablate_sync=ablate_sync,
        repair=repair,
        align_ranks=not no_align_ranks,
    )
    with shown(not (as_json or quiet())):
        result = simulate(trace, options)
        comparison = compare(result, read_measured(trace))
    if as_json:
        echo_json(comparison.to_dict())
        return
    render_comparison(comparison, Console())
    if not quiet():
        for note in result.notes:
            click.echo(f"note: {note}")
