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

#: sub-command modules; each defines `register(group)`.
COMMAND_MODULES = (
    "lumos.cli.et",
    "lumos.cli.convert",
    "lumos.cli.simulate",
    "lumos.cli.export",
    "lumos.cli.compare",
)


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


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.version_option(__version__, prog_name="lumos")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """lumos: Chakra execution traces from distributed PyTorch training — convert,
    simulate, estimate, export to ASTRA-sim."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def _register_all() -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # that area is not built yet
                continue
            raise
        module.register(cli)


_register_all()


def main() -> None:
    """Console-script entry point."""
    cli()
