"""`lumos compare`: replay a trace and put simulated and measured times side by side."""

from __future__ import annotations

import click
from rich.console import Console

from lumos.cli.main import echo_json, handle_errors
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
@click.argument("target", type=click.Path(exists=False))
@click.option(
    "--hw",
    default=None,
    help="System (h100, a100, or a YAML path) pricing collectives that have no recorded time.",
)
@click.option("--ablate-sync", is_flag=True, help="Drop cross-stream and sync edges (dPRO-like).")
@click.option(
    "--repair", is_flag=True, help="Load broken foreign ETs anyway (drop dangling/cyclic deps)."
)
@click.option(
    "--no-align-ranks",
    is_flag=True,
    help="Start every rank at 0 instead of at its measured step start (step_start_ns).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@handle_errors
def compare_command(
    target: str,
    hw: str | None,
    ablate_sync: bool,
    repair: bool,
    no_align_ranks: bool,
    as_json: bool,
) -> None:
    """Replay ET_DIR_OR_PREFIX and compare with the times recorded in it.

    Measured step = the ETs' `measured_step_ns` (Kineto ProfilerStep), else the span of
    the recorded nodes; per stream/thread, busy time recorded vs simulated. Ranks start
    at their measured step starts when the ETs carry them (overall times are then last
    end minus first start on both sides).
    """
    ranks = len(find_et_sources(target))
    options = SimOptions(
        mode=Mode.REPLAY,
        pricer=_pricer(hw, ranks),
        ablate_sync=ablate_sync,
        repair=repair,
        align_ranks=not no_align_ranks,
    )
    result = simulate(target, options)
    comparison = compare(result, read_measured(target))
    if as_json:
        echo_json(comparison.to_dict())
        return
    render_comparison(comparison, Console())
