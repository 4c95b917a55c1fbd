"""`lumos whatif`: edit a traced step (layers, sizes, parallelism, hardware, faults) and
compare its simulated time with the traced one's."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from lumos.cli.console import table_console
from lumos.cli.main import echo_json, handle_errors
from lumos.cli.options import Bounded, FiniteFloatRange, InputPath, force_option, hw_option
from lumos.cli.outputs import no_stdout
from lumos.errors import ConfigError
from lumos.limits import MAX_LAYERS, MAX_MICROBATCHES, MAX_RANKS, MAX_WIDTH

#: `whatif.checks.MAX_JITTER` (not imported: it loads protobuf, which `--help` must not)
MAX_JITTER = 2.0

#: every integer flag is bounded by the resource limit its value feeds (exit 2 naming the
#: flag and the bound, before the trace is read): `--hidden 10^12` was exit 7 after it
RANKS = Bounded(1, MAX_RANKS)
WIDTH = Bounded(1, MAX_WIDTH)


def _pairs(values: tuple[str, ...], flag: str) -> tuple[tuple[int, float], ...]:
    out = []
    for v in values:
        rank, sep, factor = v.partition("=")
        try:
            if not sep:
                raise ValueError
            out.append((int(rank), float(factor)))
        except ValueError:
            raise ConfigError(f"{flag} takes RANK=FACTOR (like 3=1.5), not {v!r}") from None
    return tuple(out)


@click.command("whatif")
@click.argument("target", metavar="TRACE", type=InputPath(exists=True))
@click.option("--layers", type=Bounded(1, MAX_LAYERS), help="Transformer layers.")
@click.option("--hidden", type=WIDTH, help="Hidden size (FFN follows as 4x unless --ffn).")
@click.option("--ffn", type=WIDTH, help="FFN (MLP) size.")
@click.option("--seq", type=WIDTH, help="Sequence length.")
@click.option("--tp", type=RANKS, help="Tensor-parallel degree.")
@click.option("--dp", type=RANKS, help="Data-parallel degree.")
@click.option("--pp", type=RANKS, help="Pipeline stages (from a trace without a pipeline).")
@click.option(
    "--schedule",
    type=click.Choice(["1f1b", "interleaved", "gpipe"]),
    default="1f1b",
    show_default=True,
)
@click.option(
    "--vp",
    type=Bounded(1, MAX_LAYERS),
    default=1,
    show_default=True,
    help="Virtual stages (interleaved).",
)
@click.option(
    "--microbatches",
    type=Bounded(1, MAX_MICROBATCHES),
    help="Micro-batches per step (default: stages).",
)
@hw_option("Target system: GPU and network.")
@click.option(
    "--base-hw",
    help="System the trace was recorded on (needed with --hw; prices kernel re-timing, "
    "default h100).",
)
@click.option("--slow-rank", multiple=True, help="RANK=FACTOR: that rank's compute x FACTOR.")
@click.option("--slow-link", multiple=True, help="RANK=FACTOR: its communication x FACTOR.")
@click.option(
    "--jitter",
    type=FiniteFloatRange(0.0, MAX_JITTER),
    default=0.0,
    help="Log-normal kernel jitter (sigma).",
)
@click.option("--seed", type=Bounded(0, (1 << 63) - 1), default=0, show_default=True)
@click.option("-o", "--output", type=click.Path(), help="Write the edited ETs to this folder.")
@click.option("--prefix", default="whatif", show_default=True, help="File prefix with -o.")
@force_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--explain", is_flag=True, help="Print the structure that was recognised.")
@click.option(
    "--as-traced",
    is_flag=True,
    help="Edit the step as traced: keep recorded waits in gaps and ops' lost time slices "
    "(default: normalised first, docs/whatif.md).",
)
@handle_errors
def whatif_command(
    target: str,
    layers: int | None,
    hidden: int | None,
    ffn: int | None,
    seq: int | None,
    tp: int | None,
    dp: int | None,
    pp: int | None,
    schedule: str,
    vp: int,
    microbatches: int | None,
    hw: str | None,
    base_hw: str | None,
    slow_rank: tuple[str, ...],
    slow_link: tuple[str, ...],
    jitter: float,
    seed: int,
    output: str | None,
    prefix: str,
    force: bool,
    as_json: bool,
    explain: bool,
    as_traced: bool,
) -> None:
    """Predict TRACE's step (folder, prefix, file or tar of .et files) after the edits."""
    from lumos.converters.chakra.set_output import check_set_output
    from lumos.simulator.report.breakdown import breakdown
    from lumos.simulator.report.summary import PART_LABELS
    from lumos.simulator.whatif.api import WhatIf, result_json, run_whatif
    from lumos.simulator.whatif.etset import write_etset
    from lumos.simulator.whatif.explain import explain_lines

    spec = WhatIf(
        layers=layers,
        hidden=hidden,
        ffn=ffn,
        seq=seq,
        tp=tp,
        dp=dp,
        pp=pp,
        schedule=schedule,
        vp=vp,
        microbatches=microbatches,
        hw=hw,
        base_hw=base_hw,
        slow_ranks=_pairs(slow_rank, "--slow-rank"),
        slow_links=_pairs(slow_link, "--slow-link"),
        jitter=jitter,
        seed=seed,
        normalise=not as_traced,
    )
    if output is not None:  # refuse before the work, not after it
        check_set_output(Path(no_stdout(output, "edited ETs")), prefix, force=force)
    res = run_whatif(target, spec)
    written = write_etset(res.edited, output, prefix, force=force) if output else []
    if as_json:
        echo_json(result_json(res, written, explain))
        return
    base_bd = {b.rank: b for b in breakdown(res.base)}
    pred_bd = {b.rank: b for b in breakdown(res.predicted)}
    console = table_console()
    if explain:
        for line in explain_lines(res.recovered):
            console.print(line, highlight=False)
    for note in res.recovered.normalised.notes():
        console.print(f"base: {note}", highlight=False)
    for note in res.notes:
        console.print(f"edit: {note}", highlight=False)
    b, p = res.base.iteration_time_ns, res.predicted.iteration_time_ns
    title = f"step: base {b / 1e6:.3f} ms -> predicted {p / 1e6:.3f} ms ({(p / b - 1) * 100 if b else 0:+.1f}%)"
    table = Table(title=title)
    for col in ("rank", "", "GPU-incl.", *PART_LABELS.values()):
        table.add_column(col, justify="right")
    for rank in sorted(set(base_bd) | set(pred_bd)):
        for label, bd in (("base", base_bd.get(rank)), ("predicted", pred_bd.get(rank))):
            if bd is None:
                continue
            values = [bd.iteration_ns, *bd.parts().values()]
            table.add_row(str(rank), label, *(f"{v / 1e6:.3f}" for v in values))
    console.print(table)
    for path in written[:1]:
        click.echo(f"wrote {len(written)} ET(s) to {Path(path).parent}")
