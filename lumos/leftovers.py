"""What a killed lumos run leaves behind, how it is named, and how the next run removes it.

Every output goes through a hidden temporary: a file `.<name>.<pid>.<hex>.lumos-tmp`
(`lumos.outputs.AtomicFile`) or a folder `.<name>.<pid>.<hex>.lumos-staging`
(`lumos.staging.staging_dir`), renamed into place when complete. A SIGKILL skips the
clean-up, so every writer first sweeps the folder it writes into: temporaries whose
process is gone are deleted, whichever command left them (a killed `convert` is cleaned
by the next `export`, `whatif -o` or `et graph` into the same folder). The pid in the
name keeps a run from deleting the temporaries of another one still running.
"""

from __future__ import annotations

import os
import re
import shutil
from contextlib import suppress
from pathlib import Path

TMP_SUFFIX = ".lumos-tmp"
STAGING_SUFFIX = ".lumos-staging"

_LEFTOVER = re.compile(r"^\..+\.(?P<pid>\d+)\.[0-9a-f]+\.lumos-(?P<kind>tmp|staging)$")


def temp_name(target: str, token: str) -> str:
    """The hidden name of `target`'s temporary file, owned by this process."""
    return f".{target}.{os.getpid()}.{token}{TMP_SUFFIX}"


def staging_name(target: str, token: str) -> str:
    """The hidden name of `target`'s staging folder, owned by this process."""
    return f".{target}.{os.getpid()}.{token}{STAGING_SUFFIX}"


def in_stale_staging(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is (or lies inside) the staging folder of a run that is gone: an
    output that was never finished (a live run's own staging folder is not stale: the
    export pre-flight reads its bundle there)."""
    for part in Path(path).parts:
        match = _LEFTOVER.match(part)
        if match and match["kind"] == "staging" and not _alive(int(match["pid"])):
            return True
    return False


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def sweep(folder: str | os.PathLike[str]) -> list[Path]:
    """Delete the temporaries in `folder` whose process is gone; returns what was removed.

    Never raises: a folder that cannot be listed or an entry that cannot be deleted is
    left as it is (the write that follows reports its own errors).
    """
    removed: list[Path] = []
    with suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            match = _LEFTOVER.match(entry.name) if entry.name.startswith(".") else None
            if match is None or _alive(int(match["pid"])):
                continue
            child = Path(entry.path)
            if match["kind"] == "staging" and child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            elif match["kind"] == "tmp" and child.is_file():
                with suppress(OSError):
                    child.unlink()
            else:
                continue
            removed.append(child)
    return removed
