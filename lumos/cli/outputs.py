"""Output plumbing shared by the commands: `-o -`, refusing stdout, --allow-partial.

`output_stream` gives stdout for `-` and an atomic file otherwise; `no_stdout` refuses
`-` where a stream makes no sense; `partial_option` is the `--allow-partial` flag of the
commands that refuse an incomplete rank set (`lumos.api`, `rankset.check_rank_set`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

import click

from lumos.errors import OutputError
from lumos.outputs import atomic_write


@contextmanager
def output_stream(path: str) -> Iterator[IO[bytes]]:
    """A binary stream for `-o PATH`: stdout for `-`, else an atomic file.

    Raises OutputError if PATH cannot be written (see `lumos.outputs.AtomicFile`).
    """
    if path == "-":
        out = sys.stdout.buffer
        yield out
        out.flush()
        return
    with atomic_write(path) as f:
        yield f


def no_stdout(path: str, what: str) -> str:
    """`path` itself; `-` is refused where writing to stdout makes no sense.

    Raises OutputError for `-`.
    """
    if path == "-":
        raise OutputError(f"{what} cannot be written to stdout (-); give a path")
    return path


partial_option = click.option(
    "--allow-partial",
    is_flag=True,
    help="Use the ranks present even if some of the job's ranks are missing (a warning).",
)
