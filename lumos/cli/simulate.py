"""`lumos simulate`: run the native simulator over every rank of a trace and report."""

from __future__ import annotations

import click

from lumos.api import simulate
from lumos.cli.main import echo_json, handle_errors, quiet
from lumos.cli.options import (
    RankList,
    astra_sim_options,
    check_output,
    force_option,
    hw_option,
    json_option,
    trace_argument,
)
from lumos.cli.outputs import no_stdout, partial_option
from lumos.cli.progress import shown
from lumos.errors import MissingExtraError
from lumos.outputs import printable
from lumos.simulator.report.summary import Report
from lumos.simulator.result import SimResult
from lumos.simulator.run import Mode


def _write_plots(
    report: Report, result: SimResult, prefix: str, context: dict[str, str]
) -> list[str]:
    """The HTML breakdown always; PNGs when matplotlib is installed (else say how)."""
    from lumos.simulator.report.plots import write_plots

    try:
        return [str(p) for p in write_plots(report, result, prefix, png=True, context=context)]
    except MissingExtraError as exc:
        click.echo(f"note: {exc}; wrote the HTML breakdown only", err=True)
        return [str(p) for p in write_plots(report, result, prefix, png=False, context=context)]


def _hardware_words(hw: str | None, astra_sim_system: str | None) -> str:
    """The hardware a run priced on, in words, for the report page."""
    if astra_sim_system:
        return f"ASTRA-sim configs ({astra_sim_system})"
    if hw is None:
        return "none: recorded durations only (replay)"
    from lumos.hwconfigs.load import load_system

    system = load_system(hw)
    return f"{system.name}: {system.description}"


@click.command("simulate")
@trace_argument()
@hw_option("System whose network (and cost model) prices the run.")
@click.option(
    "--mode",
    type=click.Choice([m.value for m in Mode]),
    default=None,
    help="replay: recorded times; model: price communication with the network model; "
    "astra: ASTRA-sim compatible (default: astra with ASTRA-sim configs, model with --hw, "
    "else replay).",
)
@astra_sim_options
@click.option("--timeline", type=click.Path(), help="Write a Chrome/Perfetto trace (.json[.gz]).")
@click.option(
    "--plot",
    "plot_prefix",
    type=click.Path(),
    help="Write PREFIX.breakdown.html, and with the plot extra (matplotlib) "
    "PREFIX.breakdown.png and PREFIX.timeline.png.",
)
@json_option
@force_option
@click.option(
    "--no-sync-edges",
    is_flag=True,
    help="Ablation: drop cross-stream and GPU→CPU edges and runtime syncs (dPRO-like).",
)
@click.option("--fold", is_flag=True, help="Simulate one of each set of identical ranks (exact).")
@click.option(
    "--align-ranks/--no-align-ranks",
    default=None,
    help="Start each rank at its measured step start (step_start_ns) when the ETs carry "
    "it (default: on in replay mode).",
)
@click.option(
    "--repair", is_flag=True, help="Load broken foreign ETs anyway (drop dangling/cyclic deps)."
)
@click.option(
    "--estimate-missing",
    is_flag=True,
    help="Replay mode: price compute with no measured duration with the cost model (needs --hw).",
)
@click.option(
    "--no-timelines",
    is_flag=True,
    help="Keep no per-node times: step times and breakdowns only, no critical path "
    "(for jobs of tens of millions of nodes: ~165 instead of ~245 bytes a node; "
    "not with --timeline or --plot).",
)
@partial_option
@click.option(
    "--ranks",
    type=RankList(),
    default=None,
    help="Simulate only these ranks of the set, on purpose (0,1,5 or 0-3,8); collectives "
    "reaching other ranks start when these arrive (counted in a note).",
)
@handle_errors
def simulate_command(
    trace: str,
    hw: str | None,
    mode: str | None,
    astra_sim_system: str | None,
    astra_sim_network: str | None,
    comm_groups: str | None,
    timeline: str | None,
    plot_prefix: str | None,
    as_json: bool,
    force: bool,
    no_sync_edges: bool,
    fold: bool,
    align_ranks: bool | None,
    repair: bool,
    estimate_missing: bool,
    no_timelines: bool,
    allow_partial: bool,
    ranks: tuple[int, ...] | None,
) -> None:
    """Simulate all ranks of TRACE (folder, prefix, file or tar of <prefix>.<rank>.et).

    replay adds up the recorded durations; --hw re-prices communication (model mode) and
    prices compute that has no recorded duration; compute that has one keeps it.
    """
    if no_timelines and (timeline or plot_prefix):
        option = "--timeline" if timeline else "--plot"
        raise click.UsageError(f"{option} draws per-node times, which --no-timelines drops")
    check_output(timeline and no_stdout(timeline, "a timeline"), force, inputs=[trace])
    if plot_prefix:
        check_output(f"{no_stdout(plot_prefix, 'plots')}.breakdown.html", force, inputs=[trace])
    with shown(not (as_json or quiet())):
        sim = simulate(
            trace,
            hw=hw,
            mode=mode,
            astra_sim_system=astra_sim_system,
            astra_sim_network=astra_sim_network,
            comm_groups=comm_groups,
            fold=fold,
            align_ranks=align_ranks,
            repair=repair,
            estimate_missing=estimate_missing,
            ablate_sync=no_sync_edges,
            allow_partial=allow_partial,
            timelines=not no_timelines,
            ranks=ranks,
        )
    result, report = sim.raw, sim.report
    if timeline:
        from lumos.simulator.report.timeline import write_timeline

        write_timeline(result, timeline, critical_path=report.critical_path)
    from lumos.simulator.report.summary import render_summary

    context = {"inputs": trace, "hardware": _hardware_words(hw, astra_sim_system)}
    plots = _write_plots(report, result, plot_prefix, context) if plot_prefix else []
    if as_json:
        echo_json(sim.to_json(), timings=sim.timings())
        return
    from lumos.cli.console import table_console

    render_summary(report, table_console())
    if not quiet():
        for note in result.notes:
            click.echo(printable(f"note: {note}"))
    if timeline:
        click.echo(f"timeline: {timeline}")
    for path in plots:
        click.echo(f"plot: {path}")
