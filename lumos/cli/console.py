"""The rich console that command tables print to.

On a terminal, rich fits tables to its width. Piped into a file or another program,
rich would assume 80 columns and cut every cell that does not fit to "…", which loses
the figures a person or a script came for; there the console is wide enough for every
table lumos prints (`COLUMNS` still wins when it is set).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

#: columns a table may take when stdout is not a terminal
PIPED_WIDTH = 220


def table_console() -> Console:
    """A console on stdout: the terminal's width, or `PIPED_WIDTH` when piped."""
    from rich.console import Console

    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return Console()
    return Console(width=PIPED_WIDTH)
