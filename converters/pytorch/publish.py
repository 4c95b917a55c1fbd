"""A converted rank set appears whole or not at all, and never mixed with an older one.

`stage_for` makes a hidden staging folder (next to a new output folder, or inside an
existing one); ranks are written there; `publish` then renames the folder into place, or,
when the output folder already exists, deletes the earlier conversion's rank files of the
same prefix and moves the new ones in. A run killed before `publish` leaves only the
hidden staging folder, which the next conversion into the same place removes.
`set_id_of` names one conversion: files that share it come from the same run.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
from pathlib import Path

from lumos import __version__
from lumos.converters.pytorch.inputs import RankInputs
from lumos.errors import OutputError
from lumos.outputs import describe
from lumos.staging import staging_dir

RANK_FILE = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et(?:\.gz)?$")
_STAGING = re.compile(r"^\..+\.(?P<pid>\d+)\.[0-9a-f]+\.lumos-staging$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _sweep(folder: Path) -> None:
    """Remove staging folders left in `folder` by conversions that were killed."""
    with contextlib.suppress(OSError):
        for child in folder.iterdir():
            match = _STAGING.match(child.name)
            if match and child.is_dir() and not _alive(int(match["pid"])):
                shutil.rmtree(child, ignore_errors=True)


def stage_for(out: Path) -> Path:
    """A fresh staging folder for a conversion into `out`.

    Raises OutputError if `out` is a file, or nothing can be created there.
    """
    real = Path(os.path.realpath(out))
    if real.exists() and not real.is_dir():
        raise OutputError(f"{out}: exists and is not a folder")
    if real.is_dir():
        _sweep(real)
        return staging_dir(real, inside=real)
    if real.parent.is_dir():
        _sweep(real.parent)
    return staging_dir(real)


def publish(stage: Path, out: Path, prefix: str) -> None:
    """Move the staged rank files into `out`, replacing the prefix's earlier rank files.

    Raises OutputError if the files cannot be moved.
    """
    real = Path(os.path.realpath(out))
    try:
        if stage.parent != real and not real.exists():
            stage.rename(real)
            return
        new = {p.name for p in stage.iterdir()}
        for child in real.iterdir():
            match = RANK_FILE.match(child.name)
            if match and match["prefix"] == prefix and child.name not in new and child.is_file():
                child.unlink()
        for name in sorted(new):
            os.replace(stage / name, real / name)
    except OSError as exc:
        raise OutputError(f"{out}: cannot write the converted set: {describe(exc)}") from None


def set_id_of(inputs: list[RankInputs], world: int, step: int | None, prefix: str) -> str:
    """An id for one conversion: the same inputs and options give the same id."""
    digest = hashlib.sha256(f"{__version__}|{world}|{step}|{prefix}".encode())
    for item in inputs:
        for f in (item.host, item.kineto):
            if f is None:
                continue
            try:
                st = os.stat(f.archive or f.path)
                digest.update(f"{item.rank}|{f.path}|{st.st_size}|{st.st_mtime_ns}".encode())
            except OSError:
                digest.update(f"{item.rank}|{f.path}".encode())
    return digest.hexdigest()[:16]
