"""How commands end: the exit-code table, error → message mapping, and signals.

Every command runs under `guarded`: a lumos error becomes one `error: ...` line and the
exit code of `EXIT_CODES`; Ctrl-C and SIGTERM stop the run (writers clean up as the
exception unwinds) with 130 / 143; an OS error nobody turned into a lumos error still
gets one line, and anything else is reported as an internal error (70), not a
traceback. `lumos --help` prints the table (`epilog`), and docs/exit-codes.md repeats it.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from lumos.errors import (
    ConfigError,
    LumosError,
    OutputError,
    ResourceLimitError,
    TraceFormatError,
    ValidationError,
)
from lumos.limits import check_environment
from lumos.outputs import describe, printable

EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_FORMAT = 3
EXIT_CONFIG = 4
EXIT_OTHER = 5
EXIT_OUTPUT = 6
EXIT_LIMIT = 7
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

#: (code, meaning): the documented table, in `lumos --help` and docs/exit-codes.md.
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "success"),
    (EXIT_PROBLEMS, "problems found in the inputs and reported (validation, incomplete rank set)"),
    (EXIT_USAGE, "usage error (unknown option, missing or bad argument)"),
    (EXIT_FORMAT, "an input cannot be read (not a trace, bad framing or JSON, cut short)"),
    (EXIT_CONFIG, "a config is invalid (hardware YAML, ASTRA-sim system/network, comm groups)"),
    (EXIT_OTHER, "refused: linking, simulation or export cannot proceed; missing extra"),
    (
        EXIT_OUTPUT,
        "an output cannot be written (full disk, read-only, folder or device in the way)",
    ),
    (EXIT_LIMIT, "a resource limit was hit (raise it with the LUMOS_MAX_* variable it names)"),
    (EXIT_INTERNAL, "internal error: a bug in lumos (LUMOS_DEBUG=1 shows the traceback)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C); nothing half-written is left behind"),
    (EXIT_TERMINATED, "terminated (SIGTERM); nothing half-written is left behind"),
)

_BY_TYPE: tuple[tuple[type[LumosError], int], ...] = (
    (ValidationError, EXIT_PROBLEMS),
    (TraceFormatError, EXIT_FORMAT),
    (ConfigError, EXIT_CONFIG),
    (OutputError, EXIT_OUTPUT),
    (ResourceLimitError, EXIT_LIMIT),
)
_WRITE_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EFBIG}


def exit_code(exc: BaseException) -> int:
    """The documented exit code for an exception that ended a command."""
    for cls, code in _BY_TYPE:
        if isinstance(exc, cls):
            return code
    if isinstance(exc, LumosError):
        return EXIT_OTHER
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(exc, OSError):
        return EXIT_OUTPUT if exc.errno in _WRITE_ERRNOS else EXIT_FORMAT
    return EXIT_INTERNAL


def epilog() -> str:
    """The exit-code table as `--help` text."""
    rows = "\n".join(f"{code:>3}  {text}" for code, text in EXIT_CODES)
    return f"\b\nExit codes:\n{rows}"


def _message(exc: BaseException) -> str:
    if isinstance(exc, LumosError):
        return f"error: {exc}"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"error: {where}{describe(exc)}"
    return f"internal error (a bug in lumos): {type(exc).__name__}: {exc}"


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(EXIT_TERMINATED)


def install_signal_handlers() -> None:
    """SIGTERM unwinds like Ctrl-C, so writers remove their temporary files."""
    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, _on_sigterm)


def guarded(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a command body; turn whatever ends it into one message and an exit code."""
    try:
        check_environment()
        return func(*args, **kwargs)
    except click.exceptions.Exit:
        raise
    except click.ClickException:
        raise
    except BrokenPipeError:
        # `lumos ... | head`: the reader left; stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
    except (Exception, KeyboardInterrupt) as exc:
        if os.environ.get("LUMOS_DEBUG") and not isinstance(exc, LumosError):
            raise
        # names in the message come from traces: no control characters reach the terminal
        message = "\n".join(map(printable, _message(exc).split("\n")))
        click.echo(message, err=True)
        code = exit_code(exc)
        _json_error(exc, code, message)
        sys.exit(code)


def _json_error(exc: BaseException, code: int, message: str) -> None:
    """With `--json`, the failure as the envelope on stdout too (`error` for `result`)."""
    from lumos.cli.envelope import wants_error_envelope, write_error_envelope

    ctx = click.get_current_context(silent=True)
    if ctx is not None and wants_error_envelope(ctx):
        write_error_envelope(ctx, exc, code, message)


def exit_codes_markdown() -> str:
    """docs/exit-codes.md: the exit-code table and the resource limits (a test keeps it equal)."""
    from lumos.limits import all_limits

    lines = [
        "# Exit codes and limits",
        "",
        "Generated from `lumos/cli/exits.py` and `lumos/limits.py` (a test keeps them equal);",
        "`lumos --help` prints the same table. Every failure is one `error: ...` line on",
        "stderr naming the file, node or key; nothing half-written is left behind. With",
        "`--json`, stdout also gets the envelope with `error` (exit code, type, message) in",
        "place of `result` (docs/json.md).",
        "",
        "| code | meaning |",
        "|---|---|",
    ]
    lines += [f"| {code} | {text} |" for code, text in EXIT_CODES]
    lines += [
        "",
        "## Resource limits",
        "",
        "Input cannot make lumos allocate without bound; past a limit the run stops with",
        "exit code 7 and names the variable that raises it. A command-line flag past the",
        "limit its value feeds (`--tp 10^12`, `--mbs 10^9`, `--hidden 10^12`) is a usage",
        "error instead, exit code 2, naming the flag, the bound and the variable; `-h`",
        "shows each flag's range.",
        "",
        "| variable | default | bounds |",
        "|---|---|---|",
    ]
    lines += [f"| `{lim.env}` | {lim.default:,} | {lim.what} |" for lim in all_limits()]
    return "\n".join(lines) + "\n"
