"""`lumos compare`: replay a trace and put simulated and measured times side by side."""

from __future__ import annotations

import click

from lumos.api import compare
from lumos.cli.console import table_console
from lumos.cli.main import echo_json, handle_errors, quiet
from lumos.cli.options import check_output, force_option, hw_option, json_option, trace_argument
from lumos.cli.outputs import partial_option
from lumos.cli.progress import shown
from lumos.outputs import printable
from lumos.simulator.report.compare import render_comparison


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
@click.option(
    "--timeline",
    type=click.Path(dir_okay=False),
    help="Write measured and simulated side by side, one process each (.json[.gz], Perfetto).",
)
@force_option
@json_option
@partial_option
@handle_errors
def compare_command(
    trace: str,
    hw: str | None,
    ablate_sync: bool,
    repair: bool,
    no_align_ranks: bool,
    timeline: str | None,
    force: bool,
    as_json: bool,
    allow_partial: bool,
) -> None:
    """Replay TRACE and compare with the times recorded in it.

    Measured step = the ETs' `measured_step_ns` (Kineto ProfilerStep), else the span of
    the recorded nodes; per stream/thread, busy time recorded vs simulated. Ranks start
    at their measured step starts when the ETs carry them; the overall row is the
    slowest rank on each side. --timeline writes both steps into one Perfetto file.
    """
    check_output(timeline, force, inputs=[trace])
    with shown(not (as_json or quiet())):
        comparison = compare(
            trace,
            hw=hw,
            align_ranks=not no_align_ranks,
            repair=repair,
            ablate_sync=ablate_sync,
            allow_partial=allow_partial,
        )
    if timeline:
        comparison.write_timeline(timeline)
    if as_json:
        echo_json(comparison.to_json(), timings=comparison.simulation.timings())
        return
    render_comparison(comparison.raw, table_console())
    if timeline:
        click.echo(f"timeline (measured and simulated): {timeline}")
    if not quiet():
        for note in comparison.simulation.notes:
            click.echo(printable(f"note: {note}"))
