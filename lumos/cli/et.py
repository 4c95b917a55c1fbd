"""`lumos et ...`: inspect, validate and convert Chakra ET files."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from lumos.cli.console import table_console
from lumos.cli.main import EXIT_PROBLEMS, echo_json, handle_errors
from lumos.cli.options import InputPath, check_output, force_option, json_option
from lumos.cli.options import output_option as shared_output
from lumos.cli.outputs import no_stdout, output_stream, partial_option
from lumos.converters.chakra.files import find_et_sources, iter_sources
from lumos.converters.chakra.info import TraceInfo, trace_info
from lumos.errors import LumosError, RankSetError
from lumos.outputs import printable

PATHS = click.argument(
    "paths", nargs=-1, required=True, metavar="TRACE...", type=InputPath(exists=False)
)
F = TypeVar("F", bound=Callable[..., Any])
ONE_ET = click.argument("path", type=InputPath(exists=True, dir_okay=False))


def output_option(help_text: str) -> Callable[[F], F]:
    """The required `-o/--output FILE` of the converting commands, and `--force`."""

    def wrap(func: F) -> F:
        return shared_output(help_text)(force_option(func))

    return wrap


def _human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _print_info(info: TraceInfo, console: Console) -> None:
    first = info.ranks[0]
    console.print(
        f"[bold]{_safe(info.prefix)}[/]: {len(info.ranks)} rank(s), {info.total_nodes:,} nodes, "
        f"version {first.version!r}" + (f", schema {first.schema!r}" if first.schema else "")
    )
    table = Table("rank", "nodes", "deps", *sorted(info.totals_by_type()), title=None, box=None)
    types = sorted(info.totals_by_type())
    for r in info.ranks:
        table.add_row(
            str(r.rank), f"{r.nodes:,}", f"{r.deps:,}", *(f"{r.by_type.get(t, 0):,}" for t in types)
        )
    console.print(table)
    comm = info.totals_collectives()
    if comm:
        ct = Table(
            "communication", "count (all ranks)", "bytes (all ranks)", "without comm_size", box=None
        )
        for kind, s in sorted(comm.items()):
            ct.add_row(
                kind, f"{s.count:,}", _human_bytes(s.bytes), str(s.unsized) if s.unsized else ""
            )
        console.print(ct)
    groups = sorted({g for r in info.ranks for g in r.process_groups})
    if groups:
        console.print("process groups (pg_name): " + ", ".join(map(_safe, groups)))


def _safe(text: str, limit: int = 80) -> str:
    """Trace text for a rich console: no markup (`[/]` in a pg_name raised MarkupError),
    no control characters, and short (rich wraps a 100k-character word in 43 s)."""
    from rich.markup import escape

    text = printable(text)
    return escape(text if len(text) <= limit else text[: limit - 3] + "...")


@click.group("et")
def et_group() -> None:
    """Inspect, validate and convert Chakra ET files (<prefix>.<rank>.et)."""


@et_group.command("info")
@PATHS
@json_option
@handle_errors
def info_cmd(paths: tuple[str, ...], as_json: bool) -> None:
    """Node counts by type, collectives by type and bytes, ranks, schema version.

    TRACE: folders, prefixes, single .et files or tars of per-rank files. Files of
    different runs or with mislabelled ranks are refused (exit 1, as validate); a set
    missing ranks is described, with a warning.
    """
    from lumos.converters.chakra.rankset import rank_set_problems, read_headers

    found = [find_et_sources(p) for p in paths]
    warnings: list[str] = []
    for sources in found:
        # files of two runs, or mislabelled, are no set: totals over them describe nothing
        # (exit 1, as validate and simulate); a set missing ranks is described, with a word
        errors, missing = rank_set_problems(read_headers(sources))
        if errors:
            raise RankSetError(errors + missing)
        warnings += missing
    infos = [trace_info(sources) for sources in found]
    for problem in warnings:
        click.echo(printable(f"warning: {problem}"), err=True)
    if as_json:
        echo_json({"traces": [i.to_dict() for i in infos]})
        return
    console = table_console()
    for info in infos:
        _print_info(info, console)


@et_group.command("validate")
@PATHS
@json_option
@partial_option
@handle_errors
def validate_cmd(paths: tuple[str, ...], as_json: bool, allow_partial: bool) -> None:
    """Check ids, dependencies, cycles, attribute types, comm fields, the rank set (every
    rank 0..world_size-1 present, none foreign or mislabelled) and cross-rank collectives.

    Exits 1 if any error is found; every problem names the file, node id and name.
    """
    from lumos.converters.chakra.validate import validate_sources

    reports = [validate_sources(find_et_sources(p), allow_partial=allow_partial) for p in paths]
    problems = [p for r in reports for p in r.problems]
    errors = [p for r in reports for p in r.errors]
    files = sum(len(r.files) for r in reports)
    nodes = sum(f.nodes for r in reports for f in r.files)
    if as_json:
        out = {
            "files": files,
            "nodes": nodes,
            "errors": len(errors),
            "problems": [
                {
                    "code": p.code,
                    "severity": p.severity.value,
                    "path": p.path,
                    "node_id": p.node_id,
                    "node_name": p.node_name,
                    "message": p.message,
                }
                for p in problems
            ],
        }
        echo_json(out)
    else:
        for p in problems:
            click.echo(printable(f"{p.severity.value}: {p}"))
        status = "OK" if not errors else f"{len(errors)} error(s)"
        click.echo(f"{files} file(s), {nodes:,} nodes: {status}")
    if errors:
        sys.exit(EXIT_PROBLEMS)


@et_group.command("to-json")
@ONE_ET
@output_option("Output .json (one document) or .jsonl (JSON Lines); - for JSON Lines on stdout.")
@handle_errors
def to_json_cmd(path: str, output: str, force: bool) -> None:
    """Render one .et file as valid JSON (or JSON Lines), losslessly."""
    if output != "-":
        check_output(output, force, inputs=[path])
    from lumos.converters.chakra.json_codec import write_json

    (source,) = find_et_sources(path)
    with output_stream(output) as f:
        count = write_json(source, f, lines=output.endswith(".jsonl") or output == "-")
    if output != "-":
        click.echo(f"wrote {count:,} nodes to {output}")


@et_group.command("from-json")
@ONE_ET
@output_option("Output .et (gzip if it ends in .gz).")
@handle_errors
def from_json_cmd(path: str, output: str, force: bool) -> None:
    """Turn a .json / .jsonl rendering back into a .et file."""
    check_output(no_stdout(output, "a .et file"), force, inputs=[path])
    from lumos.converters.chakra.json_codec import json_to_et

    count = json_to_et(path, output)
    click.echo(f"wrote {count:,} nodes to {output}")


@et_group.command("graph")
@PATHS
@output_option("Output .graphml or .dot; - writes DOT to stdout.")
@click.option("--max-nodes", default=50_000, help="Refuse bigger traces.")
@handle_errors
def graph_cmd(paths: tuple[str, ...], output: str, force: bool, max_nodes: int) -> None:
    """Export the dependency graph (all ranks) as GraphML or DOT, for small traces."""
    if not output.endswith((".dot", ".graphml")) and output != "-":
        raise LumosError(f"{output}: use a .graphml or .dot file name (or - for DOT on stdout)")
    if output != "-":
        check_output(output, force, inputs=paths)
    from lumos.converters.chakra.graph_export import to_networkx, write_dot, write_graphml

    graph = to_networkx(iter_sources(list(paths)), max_nodes=max_nodes)
    with output_stream(output) as f:
        if output.endswith(".graphml"):
            write_graphml(graph, f)
        else:
            write_dot(graph, f)
    if output == "-":
        return
    click.echo(
        f"wrote {graph.number_of_nodes():,} nodes, {graph.number_of_edges():,} edges to {output}"
    )
