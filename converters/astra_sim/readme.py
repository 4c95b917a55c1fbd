"""The README of an ASTRA-sim bundle: what was mapped, dropped and repaired, and how to run it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lumos.converters.astra_sim.run_script import BACKEND_BINARY, shell_command

if TYPE_CHECKING:
    from lumos.converters.astra_sim.export import ExportSummary

MAX_FIXES_LISTED = 30


def render_readme(summary: ExportSummary) -> str:
    """Markdown text of the bundle's README.md."""
    pre = summary.preflight
    net = summary.network
    lines = [
        f"# ASTRA-sim bundle: {summary.prefix} ({summary.ranks} ranks)",
        "",
        "Written by `lumos export astra-sim`; it passed lumos's pre-flight (ASTRA-sim's",
        "load rules, collective matching per group, send/recv pairing, no cross-rank wait",
        "cycle, something to simulate). Run it with `./run.sh` (set ASTRA_SIM_BIN to",
        f"`{BACKEND_BINARY[summary.backend]}`, the {summary.backend} backend it was written "
        "for); it fails unless every rank prints its `sys[N] finished` line, and prints",
        "the step time. ASTRA-sim's logs go to $ASTRA_SIM_LOG_DIR (a new folder, or one",
        "without an earlier run's logs), else to a new temporary folder that run.sh names;",
        "nothing is written here. The command it runs (with `--logging-folder` added):",
        "",
        "```",
        shell_command(summary.prefix),
        "```",
        "",
        "## Workload",
        "",
        f"- source nodes: {summary.source_nodes}; exported nodes: {pre.nodes} "
        f"({pre.compute} GPU compute, {pre.collectives} collectives, {pre.sends} sends, "
        f"{pre.recvs} recvs)",
        "- kept: " + _counts(summary.kept),
        "- dropped (their dependencies re-pointed to the nearest kept nodes): "
        + (_counts(summary.dropped) or "none"),
        f"- CPU time the GPU waited for, as delay nodes (`cpu_gap_before:*`): {summary.delays} "
        f"nodes, {summary.delay_ns / 1e3:.1f} µs in total",
        "- GPU streams and each rank's collectives are serialised in recorded order "
        "(ctrl_deps); ids follow that topological order (ASTRA-sim issues ready nodes in "
        "ascending id, one compute and one communication op at a time).",
        "- `source_id` on every node is its id in the source ET.",
        "- collectives ASTRA-sim has no algorithm for: BARRIER becomes an ALL_REDUCE of 4 B "
        "over its group (how NCCL runs a barrier: it synchronises the members and costs "
        "the network latency); BROADCAST (and, with `--replay-unsupported-comms`, REDUCE, "
        "GATHER, SCATTER) waits its recorded duration on each rank, unsynchronised, as "
        "ASTRA-sim replays it; every collective carries `comm_size` (ASTRA-sim reads it "
        "before the type).",
        "",
        "## Communicator groups (comm_group.json)",
        "",
    ]
    if summary.groups:
        lines += [f"- {gid}: ranks {members}" for gid, members in summary.groups.items()]
    else:
        lines.append("- none: every collective spans all ranks (no `pg_name`)")
    lines += [
        "",
        "## Network and system",
        "",
        f"- dimensions (innermost first): {[t.value for t in net.topology]}, NPUs "
        f"{list(net.npus_count)}, bandwidth {list(net.bandwidth_gbps)} GB/s (1 GB = 2^30 B), "
        f"latency {list(net.latency_ns)} ns",
        f"- system: splits {summary.system.preferred_dataset_splits}, active chunks "
        f"{summary.system.active_chunks_per_dimension}, endpoint delay "
        f"{summary.system.endpoint_delay_ns} ns, local-mem-bw {summary.system.local_mem_bw_gbps} "
        "GB/s; memory: NO_MEMORY_EXPANSION",
    ]
    lines += [f"- {note}" for note in summary.notes]
    lines += ["", f"## Repairs ({len(summary.fixes)})", ""]
    lines += [f"- {fix}" for fix in summary.fixes[:MAX_FIXES_LISTED]]
    if len(summary.fixes) > MAX_FIXES_LISTED:
        lines.append(f"- ... and {len(summary.fixes) - MAX_FIXES_LISTED} more")
    if not summary.fixes:
        lines.append("- none")
    return "\n".join(lines) + "\n"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
