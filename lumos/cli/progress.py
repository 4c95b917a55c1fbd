"""Showing `lumos.progress` reports: a rich bar on a terminal, plain lines otherwise.

On a terminal (stderr is a TTY) each phase gets a bar with its count, unit, elapsed time
and ETA; the bars vanish when the command ends. Elsewhere (CI logs, pipes) a phase that
is still running prints one plain line every `PLAIN_EVERY_S` seconds — a fast command
prints nothing, a slow one is never silent for long. `-q` and `--json` turn both off.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from lumos import progress

PLAIN_EVERY_S = 5.0


class PlainLines:
    """Periodic 'phase: done/total unit (pct), elapsed' lines on stderr."""

    def __init__(self, every_s: float = PLAIN_EVERY_S) -> None:
        self.every_s = every_s
        self.started: dict[str, float] = {}
        self.last: dict[str, float] = {}

    def __call__(self, p: progress.Progress) -> None:
        now = time.monotonic()
        start = self.started.setdefault(p.phase, now)
        if now - self.last.get(p.phase, start) < self.every_s:
            return
        self.last[p.phase] = now
        click.echo(f"{p.phase}: {_count(p)}, {now - start:.0f} s", err=True)


def _count(p: progress.Progress) -> str:
    unit = f" {p.unit}" if p.unit else ""
    if p.total:
        return f"{p.done:,}/{p.total:,}{unit} ({100 * p.done / p.total:.0f}%)"
    return f"{p.done:,}{unit}"


class Bars:
    """One rich progress bar per phase (created on the phase's first report)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self.tasks: dict[str, Any] = {}

    def __call__(self, p: progress.Progress) -> None:
        task = self.tasks.get(p.phase)
        if task is None:
            task = self.tasks[p.phase] = self.bar.add_task(p.phase, total=p.total, unit=p.unit)
        self.bar.update(task, completed=p.done, total=p.total)


@contextmanager
def shown(enabled: bool = True) -> Iterator[None]:
    """Show the progress reported inside the block (nothing when not `enabled`)."""
    if not enabled:
        yield
        return
    if sys.stderr.isatty():
        bars = Bars()
        with bars.bar, progress.listening(bars):
            yield
        return
    with progress.listening(PlainLines()):
        yield
