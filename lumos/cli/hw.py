"""`lumos hw list|show NAME`: the shipped hardware systems, and what one of them holds."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

import click

from lumos.cli.main import echo_json, handle_errors
from lumos.cli.options import json_option, normalize_hw


@click.group("hw")
def hw_group() -> None:
    """List and show the shipped hardware configs (the names `--hw` takes)."""


@hw_group.command("list")
@json_option
@handle_errors
def list_cmd(as_json: bool) -> None:
    """The shipped systems: name, GPUs, nodes and fabric."""
    from lumos.hwconfigs.load import load_system, shipped_names

    systems = [load_system(name) for name in shipped_names("systems")]
    if as_json:
        echo_json([_plain(s) for s in systems])
        return
    for s in systems:
        gpus = s.num_nodes * s.node.gpus_per_node
        click.echo(
            f"{s.name:14} {s.num_nodes} x {s.node.name} ({s.node.gpus_per_node} x "
            f"{s.node.gpu.name}, {gpus} GPUs), {s.fabric.name}: {s.description}"
        )


@hw_group.command("show")
@click.argument("name", metavar="NAME|YAML", callback=lambda _c, _p, v: normalize_hw(v))
@json_option
@handle_errors
def show_cmd(name: str, as_json: bool) -> None:
    """Every field of one system (GPU, node, fabric, collective algorithms)."""
    from lumos.hwconfigs.load import load_system

    plain = _plain(load_system(name))
    if as_json:
        echo_json(plain)
        return
    _print_tree(plain, 0)


def _plain(value: Any) -> Any:
    """A hardware record as JSON-ready dicts, lists and scalars."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _print_tree(value: Any, depth: int) -> None:
    pad = "  " * depth
    for key, item in value.items():
        if isinstance(item, dict):
            click.echo(f"{pad}{key}:")
            _print_tree(item, depth + 1)
        elif isinstance(item, list) and item and isinstance(item[0], dict):
            points = ", ".join(" ".join(f"{k}={v}" for k, v in p.items()) for p in item)
            click.echo(f"{pad}{key}: {points}")
        else:
            click.echo(f"{pad}{key}: {item}")
