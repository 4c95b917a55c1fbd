"""`lumos convert`: PyTorch host ETs and/or Kineto traces of every rank → Chakra ETs."""

from __future__ import annotations

from pathlib import Path

import click

from lumos.cli.main import echo_json, handle_errors
from lumos.converters.pytorch.convert import RankSummary, convert


def _line(s: RankSummary) -> str:
    link = f"linked {s.link.linked}/{s.link.host_ops} ({s.link.rate:.1%})" if s.link else "no link"
    step = f"{s.step} {s.step_ns / 1e6:.2f} ms" if s.step_ns else s.step
    return (
        f"rank {s.rank}: {s.nodes} nodes ({s.cpu} cpu, {s.gpu} gpu, {s.comm} comm), "
        f"{step}, {link} -> {s.path}"
    )


@click.command("convert")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False))
@click.option("--prefix", default="trace", show_default=True, help="Output file prefix.")
@click.option(
    "--step", type=int, default=None, help="ProfilerStep number (default: last complete)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Ranks converted at once, in worker processes.",
)
@handle_errors
def convert_cmd(
    inputs: tuple[str, ...],
    out_dir: str,
    prefix: str,
    step: int | None,
    as_json: bool,
    jobs: int,
) -> None:
    """Convert host ETs and Kineto traces (files, folders or tars) to <prefix>.<rank>.et."""
    from rich.progress import Progress

    lines: list[RankSummary] = []
    with Progress(transient=True, disable=as_json) as progress:
        task = progress.add_task("converting", total=None)

        def on_rank(summary: RankSummary) -> None:
            lines.append(summary)
            progress.update(task, advance=1, description=f"rank {summary.rank} done")

        result = convert(
            list(inputs), Path(out_dir), prefix=prefix, step=step, on_rank=on_rank, jobs=jobs
        )
    if as_json:
        echo_json(result.to_json())
        return
    for summary in lines:
        click.echo(_line(summary))
        if summary.link and summary.link.unmatched:
            reasons = ", ".join(f"{k}: {v}" for k, v in sorted(summary.link.unmatched.items()))
            click.echo(f"  unlinked host ops: {reasons}")
        if summary.unknown_comm:
            click.echo(
                f"  {summary.unknown_comm} comm op(s) of unknown type (written as all-reduce)"
            )
    total = sum(s.nodes for s in lines)
    click.echo(f"{len(lines)} rank(s), {total} nodes, {sum(s.comm for s in lines)} comm nodes")
    for problem in result.problems:
        click.echo(f"warning: {problem}", err=True)
