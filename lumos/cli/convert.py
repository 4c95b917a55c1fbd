"""`lumos convert`: PyTorch host ETs and/or Kineto traces of every rank → Chakra ETs."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import click

from lumos.cli.main import echo_json, handle_errors, quiet
from lumos.cli.options import (
    Bounded,
    FiniteFloatRange,
    InputPath,
    check_output,
    force_option,
    json_option,
    output_option,
)
from lumos.cli.outputs import no_stdout
from lumos.cli.progress import shown
from lumos.converters.chakra.set_output import check_set_output
from lumos.converters.pytorch.convert import MIN_LINK_RATE, RankSummary, convert
from lumos.limits import MAX_WORKERS
from lumos.outputs import printable

log = logging.getLogger(__name__)


def _line(s: RankSummary) -> str:
    link = f"linked {s.link.linked}/{s.link.host_ops} ({s.link.rate:.1%})" if s.link else "no link"
    step = f"{s.step} {s.step_ns / 1e6:.2f} ms" if s.step_ns else s.step
    return printable(
        f"rank {s.rank}: {s.nodes} nodes ({s.cpu} cpu, {s.gpu} gpu, {s.comm} comm), "
        f"{step}, {link} -> {s.path}"
    )


def _steps_line(s: RankSummary) -> str:
    """Every ProfilerStep's measured time and which one was converted, and why."""
    if not s.steps:
        return f"{s.step}: {s.step_chosen_by} (no iteration time to compare with)"
    times = ", ".join(
        f"{x.name} {x.dur / 1e6:.2f} ms" + ("" if x.complete else " (GPU tail cut)")
        for x in s.steps
    )
    more = "" if s.step_chosen_by.endswith("--step") else " (--step N picks another)"
    return f"steps: {times}; converted {s.step}, {s.step_chosen_by}{more}"


@click.command("convert")
@click.argument("inputs", nargs=-1, required=True, type=InputPath(exists=True))
@output_option("Folder to write <prefix>.<rank>.et into.", old=("--out",), dir_okay=True)
@click.option("--prefix", default="trace", show_default=True, help="Output file prefix.")
@click.option(
    "--step",
    default=None,
    help="ProfilerStep number, or 'median': the typical step of a capture of several "
    "(the slowest rank's, median after the first) (default: last complete).",
)
@click.option(
    "--min-link-rate",
    type=FiniteFloatRange(0, 1),
    default=MIN_LINK_RATE,
    show_default=True,
    help="Refuse a rank whose host ET links fewer of its ops to Kineto events (a sign of "
    "files from different runs); 0 converts anyway.",
)
@click.option(
    "--allow-host-only",
    is_flag=True,
    help="When Kineto traces cover only some ranks, convert the others from their host ET "
    "alone (durations estimated; counted in the summary) instead of refusing.",
)
@force_option
@json_option
@click.option(
    "-j",
    "--jobs",
    type=Bounded(1, MAX_WORKERS),
    default=1,
    show_default=True,
    help="Ranks converted at once, in worker processes.",
)
@handle_errors
def convert_cmd(
    inputs: tuple[str, ...],
    output: str,
    prefix: str,
    step: str | None,
    min_link_rate: float,
    allow_host_only: bool,
    force: bool,
    as_json: bool,
    jobs: int,
) -> None:
    """Convert host ETs and Kineto traces (files, folders or tars) to <prefix>.<rank>.et.

    Give the host ETs and Kineto traces of the same run (each rank's pair is linked op
    by op). Host ETs alone convert too, but carry no durations: simulate them with --hw.
    """
    out = Path(no_stdout(output, "a converted rank set"))
    check_set_output(out, prefix, force=force)
    check_output(out, True, folder=True)
    lines: list[RankSummary] = []
    t0 = time.perf_counter()
    with shown(not (as_json or quiet())):
        result = convert(
            list(inputs),
            out,
            prefix=prefix,
            step=int(step) if step is not None and step.lstrip("-").isdigit() else step,
            on_rank=lines.append,
            jobs=jobs,
            min_link_rate=min_link_rate,
            allow_host_only=allow_host_only,
            force=force,
        )
    log.info("converted %d rank(s) in %.2f s", len(lines), time.perf_counter() - t0)
    if as_json:
        echo_json(result.to_json())
        return
    for summary in lines:
        click.echo(_line(summary))
        if len(summary.steps) > 1 or summary.step_chosen_by.startswith("no ProfilerStep"):
            click.echo(printable(f"  {_steps_line(summary)}"))
        if summary.link and summary.link.unmatched:
            reasons = ", ".join(f"{k}: {v}" for k, v in sorted(summary.link.unmatched.items()))
            click.echo(f"  unlinked host ops: {reasons}")
        syncs = summary.syncs
        if syncs.get("inferred") or syncs.get("rejected") or syncs.get("unresolved"):
            click.echo(
                f"  sync/wait calls: {syncs.get('recorded', 0)} named by the trace, "
                f"{syncs.get('inferred', 0)} inferred from program order, "
                f"{syncs.get('rejected', 0)} rejected (timestamps contradict), "
                f"{syncs.get('unresolved', 0)} unresolved"
            )
        graphs = summary.graph_launches
        if graphs.get("launches"):
            click.echo(
                f"  CUDA graph launches: {graphs['launches']} ({graphs.get('ops', 0)} GPU ops), "
                f"{graphs.get('joins', 0)} joins inferred from held starts"
            )
        batches = summary.p2p_batches
        if batches.get("batches"):
            click.echo(
                f"  batched P2P: {batches['batches']} SendRecv kernel(s) split into "
                f"{batches.get('ops', 0)} send/recv nodes"
            )
        if line := _gpu_records_line(summary.gpu_records):
            click.echo(line)
        if summary.unknown_comm:
            click.echo(
                f"  {summary.unknown_comm} comm op(s) of unknown type (written as all-reduce)"
            )
    total = sum(s.nodes for s in lines)
    click.echo(f"{len(lines)} rank(s), {total} nodes, {sum(s.comm for s in lines)} comm nodes")
    if lines and all(s.link is None and not s.step_ns and not s.step_chosen_by for s in lines):
        click.echo(
            "note: host ETs only — the ETs carry no measured durations; simulate them with "
            "--hw NAME (the cost model prices them)"
        )
    for problem in result.problems:
        click.echo(printable(f"warning: {problem}"), err=True)


def _gpu_records_line(gpu: dict[str, int]) -> str:
    """What the converter repaired in the rank's GPU op records ("" when nothing)."""
    parts = []
    if gpu.get("without_launch"):
        parts.append(f"{gpu['without_launch']} without their launch call (kept on their streams)")
    if gpu.get("duplicates"):
        parts.append(f"{gpu['duplicates']} recorded twice (one kept)")
    if gpu.get("before_launch"):
        lead = gpu.get("before_launch_max_ns", 0) / 1000
        parts.append(
            f"{gpu['before_launch']} starting before their launch call (clock skew, up to "
            f"{lead:.1f} µs; replayed from the call)"
        )
    if gpu.get("overlapping"):
        most = gpu.get("overlap_max_ns", 0) / 1000
        parts.append(
            f"{gpu['overlapping']} overlapping the next op of their stream (clock skew, up to "
            f"{most:.1f} µs; cut to end where it starts)"
        )
    return f"  GPU ops: {'; '.join(parts)}" if parts else ""
