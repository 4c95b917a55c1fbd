"""`lumos export ...`: hand a trace to another simulator (today: ASTRA-sim)."""

from __future__ import annotations

from pathlib import Path

import click

from lumos.api import export_astra_sim
from lumos.cli.main import echo_json, handle_errors
from lumos.cli.options import (
    InputPath,
    astra_sim_options,
    force_option,
    hw_option,
    json_option,
    output_option,
    trace_argument,
)
from lumos.cli.outputs import partial_option
from lumos.converters.astra_sim.export import ExportSummary
from lumos.converters.astra_sim.preflight import preflight_bundle
from lumos.converters.astra_sim.workload import CpuGaps


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
@click.option(
    "--astra-backend",
    "backend",
    type=click.Choice(["congestion-unaware", "congestion-aware"]),
    default="congestion-unaware",
    help="ASTRA-sim analytical backend the bundle is for (congestion-aware: 1-D network).",
)
@click.option(
    "--run",
    "run_binary",
    is_flag=True,
    help="Run the bundle on ASTRA-sim ($ASTRA_SIM_BIN) and compare it with lumos per rank.",
)
@force_option
@json_option
@partial_option
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
    backend: str,
    run_binary: bool,
    force: bool,
    as_json: bool,
    allow_partial: bool,
) -> None:
    """Write an ASTRA-sim bundle for TRACE (folder, prefix, file or tar of <prefix>.<rank>.et).

    The bundle is checked as ASTRA-sim would load it before it is moved into place;
    a problem is reported with rank, node and fix, and nothing is written.
    --astra-sim-system / --astra-sim-network replace the configs derived from --hw.
    """
    summary = export_astra_sim(
        trace,
        output,
        hw=hw,
        astra_sim_system=astra_sim_system,
        astra_sim_network=astra_sim_network,
        comm_groups=comm_groups,
        cpu_gaps=cpu_gaps,
        strict=strict,
        replay_unsupported_comms=replay_unsupported_comms,
        backend=backend,
        force=force,
        allow_partial=allow_partial,
    ).raw
    comparison = _compare(summary) if run_binary else None
    if as_json:
        data = summary.to_dict()
        if comparison is not None:
            data["astra_sim_run"] = comparison
        echo_json(data)
        return
    _print(summary)
    if comparison is not None:
        _print_comparison(comparison)


def _compare(summary: ExportSummary) -> dict[str, object]:
    """Run the bundle on the real binary and in lumos's astra mode; per-rank times."""
    from lumos.converters.astra_sim.binary import find_binary, run_bundle

    run = run_bundle(summary.bundle, find_binary(summary.backend), summary.ranks)
    lumos, wall = simulate_bundle(summary.bundle, summary.backend)
    return {
        "binary": run.binary,
        "astra_sim_ns": run.finish_ns,
        "lumos_ns": lumos,
        "astra_sim_wall_s": round(run.wall_s, 4),
        "lumos_wall_s": round(wall, 4),
    }


def _print_comparison(data: dict[str, object]) -> None:
    real = list(data["astra_sim_ns"])  # type: ignore[call-overload]
    ours = list(data["lumos_ns"])  # type: ignore[call-overload]
    click.echo(f"ASTRA-sim ({data['binary']}) vs lumos astra mode, per rank (ns):")
    worst = 0.0
    for rank, (a, b) in enumerate(zip(real, ours, strict=True)):
        rel = (b - a) / a * 100 if a else 0.0
        worst = max(worst, abs(rel))
        click.echo(f"  rank {rank:>4}: ASTRA-sim {a:>14,}  lumos {b:>14,}  {rel:+.4f}%")
    same = sum(a == b for a, b in zip(real, ours, strict=True))
    click.echo(
        f"step: ASTRA-sim {max(real):,} ns, lumos {max(ours):,} ns; {same} of {len(real)} "
        f"ranks identical, worst {worst:.4f}%; wall: ASTRA-sim {data['astra_sim_wall_s']} s, "
        f"lumos {data['lumos_wall_s']} s"
    )


@export_group.command("astra-sim-check")
@click.argument("bundle", type=InputPath(exists=True, file_okay=False, path_type=Path))
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


def simulate_bundle(
    bundle: str | Path, backend: str = "congestion-unaware"
) -> tuple[list[int], float]:
    """lumos's astra mode on an export bundle with its own configs: (finish ns per
    rank, wall seconds), timed for the bundle's analytical `backend`."""
    import json
    import time

    from lumos.simulator.network.astra import AstraPricer
    from lumos.simulator.run import Mode, SimOptions, simulate

    root = Path(bundle)
    t0 = time.perf_counter()
    from lumos.converters.astra_sim.config_files import load_astra_network, load_astra_system

    pricer = AstraPricer.for_backend(
        backend,
        load_astra_system(root / "system.json"),
        load_astra_network(root / "network.yml"),
    )
    groups = json.loads((root / "comm_group.json").read_text())
    # the bundle's pre-flight checked its files against its manifest (a bundle of part of
    # a set, exported with --allow-partial, holds only those ranks)
    options = SimOptions(mode=Mode.ASTRA, pricer=pricer, comm_groups=groups, allow_partial=True)
    result = simulate(root / "workload", options)
    return [r.iteration_time_ns for r in result.ranks], time.perf_counter() - t0
