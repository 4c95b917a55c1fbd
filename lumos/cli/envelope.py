"""The one shape of every `--json` output: a versioned envelope around the result.

    {"schema_version": "1.2", "lumos_version": "...", "command": "simulate",
     "inputs": {...}, "hardware": {...} | null, "options": {...},
     "result": {...}, "timings": {"wall_s": ..., ...}}

A command asked for `--json` that fails prints the same envelope with `error`
(`exit_code`, `type`, `message`: the stderr line) in place of `result`, so a script that
parses stdout learns why instead of reading nothing (`error_envelope`).

`inputs` are the command's positional arguments (files, folders), `options` every other
option as given (paths as strings), `hardware` the system `--hw` resolved to (or the
ASTRA-sim config files), `timings` wall-clock seconds — kept apart from `result`, which
holds only what the run computed, so two runs of the same inputs give equal results.
Schemas: `lumos/schemas/envelope.json` and one `lumos/schemas/<command>.json` per
command (docs/json.md). Bump the minor of `SCHEMA_VERSION` when keys are added, the major
when a key is renamed or removed (docs/json.md lists the versions).
"""

from __future__ import annotations

import sys
import time
from enum import Enum
from pathlib import Path
from typing import Any

import click
import orjson

from lumos import __version__

SCHEMA_VERSION = "1.2"

#: options that change only how a result is shown, not what it is
_PRESENTATION = frozenset({"as_json", "force"})
_HW_FILES = ("astra_sim_system", "astra_sim_network")
#: root-context flag: a document (result or error) is on stdout already
_WRITTEN = "lumos.json_written"


def start_clock(ctx: click.Context) -> None:
    """Remember when the command line started (for `timings.wall_s`)."""
    ctx.find_root().meta.setdefault("lumos.t0", time.perf_counter())


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _hardware(params: dict[str, Any]) -> dict[str, Any] | None:
    """The system `--hw` names (with its GPU and size), and/or ASTRA-sim config files."""
    out: dict[str, Any] = {}
    hw = params.get("hw")
    if hw:
        from lumos.hwconfigs.load import load_system

        system = load_system(hw)
        out.update(
            system=system.name,
            source=str(hw),
            gpu=system.gpu.name,
            node=system.node.name,
            fabric=system.fabric.name,
            gpus_per_node=system.gpus_per_node,
        )
    for key in _HW_FILES:
        if params.get(key):
            out[key] = str(params[key])
    return out or None


def _document(
    ctx: click.Context,
    hardware: dict[str, Any] | None,
    outcome: tuple[str, Any],
    timings: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The envelope around `outcome` (`("result", ...)` or `("error", ...)`), in key order."""
    inputs: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for param in ctx.command.params:
        name = param.name
        if name is None or name not in ctx.params or name in _PRESENTATION:
            continue
        target = inputs if isinstance(param, click.Argument) else options
        target[name] = _plain(ctx.params[name])
    t0 = ctx.find_root().meta.get("lumos.t0")
    wall = {"wall_s": round(time.perf_counter() - t0, 4)} if t0 is not None else {}
    return {
        "schema_version": SCHEMA_VERSION,
        "lumos_version": __version__,
        "command": ctx.command_path.split(" ", 1)[1] if " " in ctx.command_path else "",
        "inputs": inputs,
        "hardware": hardware,
        "options": options,
        outcome[0]: outcome[1],
        "timings": wall | {k: round(v, 4) for k, v in (timings or {}).items()},
    }


def envelope(
    result: Any,
    *,
    timings: dict[str, float] | None = None,
    hardware: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Wrap `result` for the running click command (inputs and options read from it)."""
    ctx = click.get_current_context()
    ctx.find_root().meta[_WRITTEN] = True
    hw = hardware if hardware is not None else _hardware(ctx.params)
    return _document(ctx, hw, ("result", result), timings)


def wants_error_envelope(ctx: click.Context, asked: bool | None = None) -> bool:
    """True when the failing command was asked for `--json` (`asked`, else its parsed
    option) and has printed no document yet."""
    if not (ctx.params.get("as_json") if asked is None else asked):
        return False
    return not ctx.find_root().meta.get(_WRITTEN)


def error_envelope(
    ctx: click.Context, exc: BaseException, code: int, message: str
) -> dict[str, Any]:
    """The envelope of a failed `--json` command: `error` in place of `result`.

    `hardware` is null: the failure may be the hardware config itself, so it is not
    resolved again here."""
    error = {"exit_code": code, "type": type(exc).__name__, "message": message}
    return _document(ctx, None, ("error", error))


def write_error_envelope(ctx: click.Context, exc: BaseException, code: int, message: str) -> None:
    """Print `error_envelope` on stdout, once; a closed stdout is left to the stderr line."""
    ctx.find_root().meta[_WRITTEN] = True
    doc = error_envelope(ctx, exc, code, message.removeprefix("error: "))
    try:
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
        sys.stdout.flush()
    except OSError:
        pass
