"""Progress of long work: library code reports it, the CLI shows it (or nobody listens).

`report("convert", 3, 8, "ranks")` tells every listener that phase "convert" has done 3 of
8 ranks; `total=None` when the amount is not known. Without a listener a report costs
one empty loop. The CLI listens with a progress bar on a terminal and periodic plain
lines otherwise (`lumos.cli.progress`). Like `lumos.errors`, any layer may import this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Progress:
    """Phase `phase` has done `done` of `total` `unit` (total None: unknown)."""

    phase: str
    done: int
    total: int | None
    unit: str


Listener = Callable[[Progress], None]
_listeners: list[Listener] = []


def report(phase: str, done: int, total: int | None = None, unit: str = "") -> None:
    """Tell the listeners how far a phase has come."""
    for listener in _listeners:
        listener(Progress(phase, done, total, unit))


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Call `listener` with every report made inside the block."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)
