"""`lumos` entry point: the command group, shared options, and error → exit-code mapping.

Each sub-command lives in its own module under `lumos.cli` and only parses options,
calls one library function and prints its result. Library code raises typed errors from
`lumos.errors`; this module alone turns them into messages and exit codes.
"""

from __future__ import annotations

import functools
import importlib
import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
import orjson

from lumos import __version__
from lumos.errors import (
    ConfigError,
    LumosError,
    MissingExtraError,
    TraceFormatError,
    ValidationError,
)

F = TypeVar("F", bound=Callable[..., Any])

#: exit codes: 1 = a problem in the inputs was found and reported; 2 = usage (click);
#: 3 = unreadable input; 4 = bad config; 5 = other lumos error.
EXIT_PROBLEMS = 1
EXIT_FORMAT = 3
EXIT_CONFIG = 4
EXIT_OTHER = 5

#: sub-commands: name -> (module, click object in it, one-line help). A command's module
#: (and numpy, rich, the simulator ...) is imported only when that command runs or shows
#: its own help, so `lumos --help` and `lumos --version` start in a few tens of ms.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "convert": (
        "lumos.cli.convert",
        "convert_cmd",
        "PyTorch host ETs and/or Kineto traces -> Chakra ETs.",
    ),
    "et": ("lumos.cli.et", "et_group", "Inspect, validate and convert Chakra ET files."),
    "simulate": (
        "lumos.cli.simulate",
        "simulate_command",
        "Simulate every rank of a trace and report.",
    ),
    "compare": (
        "lumos.cli.compare",
        "compare_command",
        "Simulated vs measured step, per rank and stream.",
    ),
    "export": (
        "lumos.cli.export",
        "export_group",
        "Hand a trace to another simulator (ASTRA-sim).",
    ),
}


def handle_errors(func: F) -> F:
    """Turn lumos errors raised by a command into a one-line message and an exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ValidationError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_PROBLEMS)
        except TraceFormatError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_FORMAT)
        except ConfigError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_CONFIG)
        except (MissingExtraError, LumosError) as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_OTHER)

    return wrapper  # type: ignore[return-value]


def echo_json(payload: object) -> None:
    """Print `payload` as indented JSON on stdout (every command's `--json`)."""
    sys.stdout.buffer.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


class LazyGroup(click.Group):
    """A click group whose sub-commands are imported on first use (see `COMMANDS`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            module_name, attr, _ = COMMANDS[cmd_name]
            self.add_command(getattr(importlib.import_module(module_name), attr), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in sorted(COMMANDS)]
        rows += [(n, c.get_short_help_str()) for n, c in self.commands.items() if n not in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(sorted(rows))


@click.group(
    cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "show_default": True}
)
@click.version_option(__version__, prog_name="lumos")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """lumos: Chakra execution traces from distributed PyTorch training — convert,
    simulate, estimate, export to ASTRA-sim."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def main() -> None:
    """Console-script entry point."""
    cli()
