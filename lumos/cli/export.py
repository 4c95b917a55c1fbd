"""`lumos export ...`: hand a trace to another simulator (today: ASTRA-sim)."""

from __future__ import annotations

from pathlib import Path

import click

from lumos.cli.main import echo_json, handle_errors
from lumos.converters.astra_sim.export import ExportRequest, ExportSummary, export_astra_sim
from lumos.converters.astra_sim.preflight import preflight_bundle
from lumos.converters.astra_sim.workload import CpuGaps, ExportOptions


@click.group("export")
def export_group() -> None:
    """Export per-rank Chakra ETs for another simulator."""


@export_group.command("astra-sim")
@click.argument("trace", type=click.Path(exists=False))
@click.option(
    "-o",
    "--output",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Bundle folder to write (workload/, configs, run.sh, README.md).",
)
@click.option("--hw", help="lumos hardware config: short name (h100, a100, ...) or YAML path.")
@click.option(
    "--system",
    "system_file",
    type=click.Path(exists=True, path_type=Path),
    help="Use this ASTRA-sim system JSON instead of deriving it from --hw.",
)
@click.option(
    "--network",
    "network_file",
    type=click.Path(exists=True, path_type=Path),
    help="Use this ASTRA-sim network YAML instead of deriving it from --hw.",
)
@click.option(
    "--comm-groups",
    "comm_groups_file",
    type=click.Path(exists=True, path_type=Path),
    help="The trace's comm-group JSON, for numeric pg_names of foreign ETs.",
)
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
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@handle_errors
def astra_sim_command(
    trace: str,
    out_dir: Path,
    hw: str | None,
    system_file: Path | None,
    network_file: Path | None,
    comm_groups_file: Path | None,
    cpu_gaps: str,
    strict: bool,
    replay_unsupported_comms: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Write an ASTRA-sim bundle for TRACE (folder, prefix, file or tar of <prefix>.<rank>.et).

    The bundle is checked as ASTRA-sim would load it before it is moved into place;
    a problem is reported with rank, node and fix, and nothing is written.
    """
    options = ExportOptions(
        cpu_gaps=CpuGaps(cpu_gaps),
        strict=strict,
        replay_unsupported_comms=replay_unsupported_comms,
    )
    summary = export_astra_sim(
        ExportRequest(
            target=trace,
            out_dir=out_dir,
            hw=hw,
            system_file=system_file,
            network_file=network_file,
            comm_groups_file=comm_groups_file,
            options=options,
            force=force,
        )
    )
    if as_json:
        echo_json(summary.to_dict())
    else:
        _print(summary)


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
