"""Typed exceptions of lumos, all under one base so callers can catch one thing.

Library code raises these and never exits; the CLI maps them to exit codes and messages.
Each error says which file, node or key it is about, so a user can act on it.
"""

from __future__ import annotations

from typing import Any


def _rebuild(cls: type[LumosError], args: tuple[object, ...], state: dict[str, Any]) -> LumosError:
    """An error as `LumosError.__reduce__` saved it, without calling its `__init__`."""
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class LumosError(Exception):
    """Base of every error lumos raises on purpose.

    Pickles with its message and fields (a pool worker's error reaches the parent whole):
    the default would call `__init__` again with the formatted message alone.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


class TraceFormatError(LumosError):
    """A trace file cannot be read: bad framing, bad JSON, unknown schema.

    Carries the file path and, where known, the byte offset or event index.
    """

    def __init__(self, path: str, message: str, *, where: str | None = None) -> None:
        self.path = path
        self.where = where
        loc = f"{path}" + (f" ({where})" if where else "")
        super().__init__(f"{loc}: {message}")


class ValidationError(LumosError):
    """A trace or graph breaks a rule (dangling dependency, cycle, mismatched collective).

    `problems` holds every problem found, each already naming its file, node id and name.
    """

    def __init__(self, problems: list[str], *, header: str = "validation failed") -> None:
        self.problems = problems
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"{header}: {len(problems)} problem(s)\n  {shown}{more}")


class ConfigError(LumosError):
    """A hardware, system or network config is invalid (unknown key, bad unit, bad value)."""


class LinkError(LumosError):
    """Host ET and Kineto traces cannot be linked consistently."""


class SimulationError(LumosError):
    """The simulation cannot proceed (deadlock, unmatched collective at run time)."""


class ExportError(LumosError):
    """An export bundle would not run in the target tool; names rank, node and the fix."""


class RankSetError(ValidationError):
    """The per-rank files of a trace do not form one complete set (missing, foreign or
    mislabelled ranks, files of two different conversions)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems, header="incomplete or inconsistent rank set")


class OutputError(LumosError):
    """An output cannot be written: full disk, read-only folder, a directory or device in
    the way, a name that would leave the output folder. Names the path; nothing half
    written is left behind."""


class ResourceLimitError(LumosError):
    """Input asks lumos to allocate more than a safety limit; names the limit and the
    environment variable that raises it."""

    def __init__(self, what: str, value: int, limit: int, env: str) -> None:
        self.env = env
        super().__init__(
            f"{what} is {value:,}, above the limit of {limit:,} (raise it with {env}=N "
            "if the input is genuine)"
        )


class MissingExtraError(LumosError):
    """An optional dependency is needed; names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"this feature needs {package!r}; install it with: pip install 'lumos[{extra}]'"
        )
