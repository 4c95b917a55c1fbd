"""`lumos export ...`: hand a trace to another simulator (today: ASTRA-sim)."""

from __future__ import annotations

from pathlib import Path

import click

from lumos.cli.main import echo_json, handle_errors
from lumos.cli.options import (
    astra_sim_options,
    force_option,
    hw_option,
    json_option,
    output_option,
    trace_argument,
)
from lumos.converters.astra_sim.export import ExportRequest, ExportSummary, export_astra_sim
from lumos.converters.astra_sim.preflight import preflight_bundle
from lumos.converters.astra_sim.workload import CpuGaps, ExportOptions


@click.group("export")
def export_group() -> None:
    """Export per-rank Chakra ETs for another simulator."""


@export_group.command("astra-sim")
@trace_argument()
@output_option("Bundle folder to write (workload/, configs, run.sh, README.md).", dir_okay=True)
@hw_option("System the ASTRA-sim system/network configs are derived from.")
@astra_sim_options
@click.option(
    "--cpu-gaps",
    type=click.Choice([m.value for m in CpuGaps]),
    default=CpuGaps.DELAY.value,
    help="CPU time the GPU waited for: delay nodes, or dependencies only.",
)
@click.option("--strict", is_flag=True, help="Refuse instead of repairing fixable problems.")
@click.option(
    "--replay-unsupported-comms",
    is_flag=True,
    help="Replay collectives ASTRA-sim cannot simulate by their recorded duration.",
)
@force_option
@json_option
@handle_errors
def astra_sim_command(
    trace: str,
    output: str,
    hw: str | None,
    astra_sim_system: str | None,
    astra_sim_network: str | None,
    comm_groups: str | None,
    cpu_gaps: str,
    strict: bool,
    replay_unsupported_comms: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Write an ASTRA-sim bundle for TRACE (folder, prefix, file or tar of <prefix>.<rank>.et).

    The bundle is checked as ASTRA-sim would load it before it is moved into place;
    a problem is reported with rank, node and fix, and nothing is written.
    --astra-sim-system / --astra-sim-network replace the configs derived from --hw.
    """
    options = ExportOptions(
        cpu_gaps=CpuGaps(cpu_gaps),
        strict=strict,
        replay_unsupported_comms=replay_unsupported_comms,
    )
    summary = export_astra_sim(
        ExportRequest(
            target=trace,
            out_dir=Path(output),
            hw=hw,
            system_file=_path(astra_sim_system),
            network_file=_path(astra_sim_network),
            comm_groups_file=_path(comm_groups),
            options=options,
            force=force,
        )
    )
    if as_json:
        echo_json(summary.to_dict())
    else:
        _print(summary)


def _path(value: str | None) -> Path | None:
    return None if value is None else Path(value)


@export_group.command("astra-sim-check")
@click.argument("bundle", type=click.Path(exists=True, file_okay=False, path_type=Path))
@handle_errors
def astra_sim_check_command(bundle: Path) -> None:
    """Run the pre-flight on an existing ASTRA-sim bundle folder (e.g. after editing it)."""
    report = preflight_bundle(bundle)
    click.echo(
        f"{bundle}: OK, {report.ranks} ranks, {report.nodes} nodes ({report.compute} compute, "
        f"{report.collectives} collectives, {report.sends} sends, {report.recvs} recvs), "
        f"{report.groups} comm groups"
    )


def _print(summary: ExportSummary) -> None:
    pre = summary.preflight
    click.echo(
        f"wrote {summary.bundle}: {summary.ranks} ranks, {summary.source_nodes} source nodes -> "
        f"{pre.nodes} ({pre.compute} compute, {pre.collectives} collectives, {pre.sends} sends, "
        f"{pre.recvs} recvs), {len(summary.groups)} comm groups"
    )
    if summary.dropped:
        click.echo("dropped: " + ", ".join(f"{n} {k}" for k, n in sorted(summary.dropped.items())))
    if summary.delays:
        click.echo(f"CPU gaps as delay nodes: {summary.delays} ({summary.delay_ns / 1e3:.1f} µs)")
    for fix in summary.fixes[:10]:
        click.echo(f"repaired: {fix}", err=True)
    if len(summary.fixes) > 10:
        click.echo(f"repaired: ... and {len(summary.fixes) - 10} more (see README.md)", err=True)
    for note in summary.notes:
        click.echo(f"note: {note}")
    click.echo(f"run: {summary.bundle / 'run.sh'}")
