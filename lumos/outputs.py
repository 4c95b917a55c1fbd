"""Writing outputs safely: all or nothing, through symlinks, never over a device.

Every file lumos writes goes through `AtomicFile`: a temporary sibling of the real
target (a symlink's target, not the link), created with the mode a plain `open` would
give (0666 less the umask, or the replaced file's mode), renamed over the target only
when complete. A full disk, a read-only folder, a directory or a device node where the
file should go becomes one `OutputError` naming the path, and no `*.tmp` or empty file
is left behind. `staging_dir` is the same for folders. Before writing, the folder is
swept of what killed runs left there (`lumos.leftovers`).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, cast

from lumos.errors import OutputError
from lumos.leftovers import TMP_SUFFIX, sweep, temp_name

__all__ = [
    "TMP_SUFFIX",
    "AtomicFile",
    "atomic_text",
    "atomic_write",
    "output_target",
    "printable",
]


def umask() -> int:
    """The process umask (read without changing it where /proc allows)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


#: control characters (C0, DEL, C1) and bidirectional overrides, as escapes
_UNPRINTABLE = {
    c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"
    for c in (
        *range(0x20),
        0x7F,
        *range(0x80, 0xA0),
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    )
}


def printable(text: str) -> str:
    """`text` safe to print on a terminal: an op or file name from a trace cannot move
    the cursor, set the title, write the clipboard (OSC 52) or reorder the line; each
    control character becomes its `\\xNN` escape."""
    return text.translate(_UNPRINTABLE)


def describe(exc: OSError) -> str:
    """A short reason for an OS error (`no space left on device`, ...)."""
    if exc.errno == errno.ENOSPC:
        return "no space left on device"
    if exc.errno == errno.EROFS:
        return "read-only file system"
    return (exc.strerror or str(exc)).lower()


def is_link_loop(path: str | os.PathLike[str]) -> bool:
    """Whether `path` (or a folder on its way) is a symbolic-link loop, which `exists`,
    `is_dir` and `is_file` call absent and `Path.resolve` turns into RuntimeError."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def refuse_link_loop(path: str | os.PathLike[str]) -> None:
    """Raises OutputError if `path` (or a folder on its way) is a symbolic-link loop: no
    output can be written there."""
    if is_link_loop(path):
        raise OutputError(
            f"{path}: a symbolic link loop (its links point at each other); remove it "
            "or name another output"
        )


def output_target(path: str | os.PathLike[str]) -> Path:
    """The real file an output named `path` goes to: a symlink's target, made absolute.

    Raises OutputError if a directory, device, FIFO or socket is in the way.
    """
    given = Path(path)
    refuse_link_loop(given)
    real = Path(os.path.realpath(given))
    try:  # the given path first: /dev/stdout on a pipe resolves to no real path
        st = os.stat(given)
    except FileNotFoundError:
        return real
    except OSError as exc:
        raise OutputError(f"{given}: cannot write: {describe(exc)}") from None
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{given}: is a directory; give a file name")
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(
            f"{given}: is a special file (device, FIFO or socket); refusing to replace it"
            " (-o - writes to stdout where a command can stream)"
        )
    return real


def _ensure_parent(given: Path, real: Path) -> None:
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{given}: cannot create its folder: {describe(exc)}") from None


class AtomicFile:
    """A temporary file that becomes `path` on `commit()` and disappears on `abort()`.

    Raises OutputError (from the constructor, `write` through `file`, or `commit`) with
    the user's path in the message.
    """

    def __init__(self, path: str | os.PathLike[str], *, buffering: int = 1 << 20) -> None:
        self.given = Path(path)
        self.target = output_target(self.given)
        _ensure_parent(self.given, self.target)
        try:
            mode = stat.S_IMODE(os.stat(self.target).st_mode)
        except OSError:
            mode = 0o666 & ~umask()
        sweep(self.target.parent)  # what killed runs left here
        import secrets  # hmac, hashlib and random: only when an output is written

        self.tmp = self.target.with_name(temp_name(self.target.name, secrets.token_hex(4)))
        try:
            fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.fchmod(fd, mode)
        except OSError as exc:
            raise OutputError(f"{self.given}: cannot write: {describe(exc)}") from None
        self.file: IO[bytes] = os.fdopen(fd, "wb", buffering=buffering)
        self.done = False

    def commit(self) -> None:
        """Close the temporary file and rename it over the target."""
        try:
            self.file.close()
            os.replace(self.tmp, self.target)
        except OSError as exc:
            self.abort()
            raise OutputError(f"{self.given}: cannot write: {describe(exc)}") from None
        self.done = True

    def abort(self) -> None:
        """Drop the partial output (safe to call twice)."""
        if self.done:
            return
        self.done = True
        with suppress(OSError):
            self.file.close()
        self.tmp.unlink(missing_ok=True)


@contextmanager
def atomic_write(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """`with atomic_write(p) as f:` — `p` appears complete or not at all.

    Raises OutputError on a full disk, a read-only folder or anything in the way.
    """
    out = AtomicFile(path)
    try:
        yield out.file
    except OSError as exc:
        out.abort()
        if exc.filename is None or str(exc.filename) == str(out.tmp):
            raise OutputError(f"{out.given}: cannot write: {describe(exc)}") from None
        raise
    except BaseException:
        out.abort()
        raise
    out.commit()


@contextmanager
def atomic_text(path: str | os.PathLike[str]) -> Iterator[IO[str]]:
    """`atomic_write` for UTF-8 text."""
    import io

    with atomic_write(path) as raw:
        text = io.TextIOWrapper(cast(IO[bytes], raw), encoding="utf-8", write_through=True)
        yield text
        text.flush()
        text.detach()
