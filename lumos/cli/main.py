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
from lumos.cli.exits import (
    EXIT_CONFIG,
    EXIT_FORMAT,
    EXIT_OTHER,
    EXIT_PROBLEMS,
    epilog,
    guarded,
    install_signal_handlers,
)

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["EXIT_CONFIG", "EXIT_FORMAT", "EXIT_OTHER", "EXIT_PROBLEMS", "cli", "handle_errors"]

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
    "estimate": (
        "lumos.cli.estimate",
        "estimate_command",
        "Step time, MFU and memory of a plan, no trace.",
    ),
    "sweep": (
        "lumos.cli.sweep",
        "sweep_command",
        "Search the parallel-plan space of a job; rank plans by tokens/s/GPU.",
    ),
    "whatif": (
        "lumos.cli.whatif",
        "whatif_command",
        "Edit a traced step (layers, sizes, DP, GPU) and predict it.",
    ),
    "export": (
        "lumos.cli.export",
        "export_group",
        "Hand a trace to another simulator (ASTRA-sim).",
    ),
    "hw": ("lumos.cli.hw", "hw_group", "List and show the shipped hardware configs."),
}


def quiet() -> bool:
    """True when `-q` was given anywhere on the command line."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.find_root().meta.get("lumos.quiet"))


def _set_verbosity(ctx: click.Context, param: click.Parameter, value: int) -> None:
    """-v/-q counted over the whole command line (group and sub-command alike)."""
    meta = ctx.find_root().meta
    key = f"lumos.{param.name}"
    meta[key] = meta.get(key, 0) + int(value or 0)
    configure_logging(meta.get("lumos.verbose", 0), bool(meta.get("lumos.quiet")))


def configure_logging(verbose: int, quiet: bool) -> None:
    """lumos's loggers to stderr: warnings by default, -v info, -vv debug, -q errors."""
    level = logging.ERROR if quiet else logging.WARNING - 10 * min(verbose, 2)
    root = logging.getLogger("lumos")
    root.setLevel(level)
    if not any(getattr(h, "_lumos", False) for h in root.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handler._lumos = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        root.propagate = False


def verbosity_options() -> list[click.Option]:
    """`-v/--verbose` and `-q/--quiet`, accepted by the group and by every sub-command."""
    return [
        click.Option(
            ["-v", "--verbose"],
            count=True,
            expose_value=False,
            show_default=False,
            callback=_set_verbosity,
            help="More log output (-v phases, counts, timings; -vv debug).",
        ),
        click.Option(
            ["-q", "--quiet"],
            count=True,
            expose_value=False,
            show_default=False,
            callback=_set_verbosity,
            help="Errors only: no notes, warnings or progress.",
        ),
    ]


def _add_verbosity(command: click.Command) -> None:
    """Give `command` (and a group's sub-commands) the -v/-q options, once."""
    if not any(p.name == "verbose" for p in command.params):
        command.params += verbosity_options()
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _add_verbosity(sub)


def handle_errors(func: F) -> F:
    """Turn whatever ends a command into a one-line message and its documented exit code
    (`lumos.cli.exits.EXIT_CODES`)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return guarded(func, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def echo_json(
    payload: object,
    *,
    timings: dict[str, float] | None = None,
    hardware: dict[str, Any] | None = None,
) -> None:
    """Print every command's `--json`: `payload` as the `result` of the versioned
    envelope (`lumos.cli.envelope`: schema_version, inputs, hardware, options, timings)."""
    from lumos.cli.envelope import envelope

    doc = envelope(payload, timings=timings, hardware=hardware)
    sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


class LazyGroup(click.Group):
    """A click group whose sub-commands are imported on first use (see `COMMANDS`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def invoke(self, ctx: click.Context) -> Any:
        """Run the sub-command; a usage error under `--json` also prints the error
        envelope on stdout (the message still goes to stderr, exit code 2)."""
        argv = [*getattr(ctx, "_protected_args", ()), *ctx.args]
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            if exc.ctx is not None:
                from lumos.cli.envelope import wants_error_envelope, write_error_envelope

                if wants_error_envelope(exc.ctx, asked="--json" in argv):
                    write_error_envelope(exc.ctx, exc, exc.exit_code, exc.format_message())
            raise

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            module_name, attr, _ = COMMANDS[cmd_name]
            command = getattr(importlib.import_module(module_name), attr)
            _add_verbosity(command)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in sorted(COMMANDS)]
        rows += [(n, c.get_short_help_str()) for n, c in self.commands.items() if n not in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(sorted(rows))


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
    epilog=epilog()
    + '\n\nShell completion: eval "$(_LUMOS_COMPLETE=bash_source lumos)" (zsh_source, '
    "fish_source for those shells).",
)
@click.version_option(__version__, prog_name="lumos")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """lumos: Chakra execution traces from distributed PyTorch training — convert,
    simulate, estimate, export to ASTRA-sim.

    -v/-q work before or after the command name."""
    install_signal_handlers()
    from lumos.cli.envelope import start_clock

    start_clock(ctx)


cli.params += verbosity_options()


def main() -> None:
    """Console-script entry point."""
    cli()
