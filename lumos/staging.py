"""Output folders: staged next to (or inside) their target, names that cannot escape it.

A folder of outputs (a converted rank set, an export bundle) is written into a hidden
staging folder first and moved into place when complete (the callers do the move).
Staging folders get the permissions `mkdir` would give (0777 less the umask), not the
0700 of `tempfile.mkdtemp`. Staging folders that killed runs left in the same place are
removed first, by whichever writer comes next (`lumos.leftovers`).
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

from lumos.errors import OutputError
from lumos.leftovers import staging_name, sweep
from lumos.outputs import describe, refuse_link_loop


def staging_dir(target: Path, *, inside: Path | None = None) -> Path:
    """A fresh hidden folder next to `target` (or in `inside`) with umask permissions.

    Raises OutputError if it cannot be created.
    """
    refuse_link_loop(target)
    parent = inside if inside is not None else target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        sweep(parent)
        folder = parent / staging_name(target.name, secrets.token_hex(3))
        folder.mkdir(0o777)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {describe(exc)}") from None
    return folder


def remove_tree(path: Path) -> None:
    """Delete a staging folder, ignoring what is already gone."""
    shutil.rmtree(path, ignore_errors=True)


def safe_name(name: str, what: str = "prefix") -> str:
    """`name` itself if it is one plain file-name component.

    Raises OutputError for separators, `.`/`..` (a `--prefix ../../x` must not write
    outside the output folder) or control characters (NUL, a newline: no rank-file
    pattern matches such a name, so the set could not be found again).
    """
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise OutputError(f"{what} {name!r} must be a plain file name (no folders, not . or ..)")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        raise OutputError(
            f"{what} {name!r} must be a plain file name (it holds a control character)"
        )
    return name
