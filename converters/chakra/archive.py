"""Tar archives of traces, opened without trusting their headers.

Every reader of a tar (rank sets, the simulator's one-pass load, Kineto and host-ET
inputs of `convert`) opens it with `open_tar` or `open_member`. The member headers are
scanned once, before any member is read: a member claiming more bytes than a plain
archive holds (a tar cut short) is a TraceFormatError, and a compressed archive whose
members add up to more than `limits.MAX_GZIP_RATIO` times its size (a decompression
bomb) a ResourceLimitError. A damaged archive, found while scanning or while a member
is read, is one TraceFormatError naming it, never a `tarfile.ReadError`. Members are
read into memory or streamed, never extracted to disk, so names with `..` or absolute
paths cannot write anywhere; only regular files are taken as traces (links, devices
and FIFOs are skipped by the callers' `member.isfile()`).
"""

from __future__ import annotations

import gzip
import io
import lzma
import os
import tarfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, cast

from lumos.errors import TraceFormatError
from lumos.limits import GZIP_RATIO_AFTER, MAX_GZIP_RATIO

_COMPRESSED = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")
#: what a damaged archive raises while its members are read (bz2 raises OSError)
_READ_ERRORS = (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile)


_TAR_NAMES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


def is_tar(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a tar archive; a damaged one counts if its name says tar (so
    `open_tar` names the damage) — `tarfile.is_tarfile` raises EOFError on a cut .tar.gz."""
    try:
        return tarfile.is_tarfile(path)
    except (*_READ_ERRORS, OSError):
        return os.fspath(path).endswith(_TAR_NAMES)


def _damaged(name: str, exc: BaseException) -> TraceFormatError:
    reason = str(exc) or type(exc).__name__
    return TraceFormatError(name, f"damaged or truncated tar archive: {reason}")


def _scan(tar: tarfile.TarFile, name: str) -> None:
    size = max(1, os.path.getsize(name))
    with open(name, "rb") as f:
        compressed = f.read(6).startswith(_COMPRESSED)
    cap = max(GZIP_RATIO_AFTER, MAX_GZIP_RATIO.value * size) if compressed else size
    for member in tar:  # loads every header (tarfile keeps them for later lookups)
        end = member.offset_data + member.size
        if end <= cap or not member.isfile():
            continue
        if compressed:
            MAX_GZIP_RATIO.check(
                -(-end // size), f"{name}: gzip expansion ratio (up to tar member {member.name!r})"
            )
        raise TraceFormatError(
            name,
            f"tar cut short: member {member.name!r} says {member.size:,} bytes at byte "
            f"{member.offset_data:,}, the archive holds {size:,}",
        )


def _open_checked(name: str) -> tarfile.TarFile:
    try:
        tar = tarfile.open(name)  # noqa: SIM115 - closed by the caller
    except (*_READ_ERRORS, OSError) as exc:
        raise _damaged(name, exc) from None
    try:
        _scan(tar, name)
    except (*_READ_ERRORS, OSError) as exc:
        tar.close()
        raise _damaged(name, exc) from None
    except BaseException:
        tar.close()
        raise
    return tar


@contextmanager
def open_tar(path: str | os.PathLike[str]) -> Iterator[tarfile.TarFile]:
    """The archive at `path`, its headers scanned and checked (see the module).

    Raises TraceFormatError for a damaged or cut archive (also when the body of the
    `with` block reads a member and finds it damaged), ResourceLimitError for a bomb.
    """
    name = os.fspath(path)
    tar = _open_checked(name)
    try:
        yield tar
    except _READ_ERRORS as exc:
        raise _damaged(name, exc) from None
    finally:
        tar.close()


class _Member(io.RawIOBase):
    """A member's bytes; a damaged archive found while reading is a TraceFormatError."""

    def __init__(self, tar: tarfile.TarFile, handle: IO[bytes], name: str) -> None:
        self._tar, self._handle, self._name = tar, handle, name

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._handle.read(len(buffer))
        except _READ_ERRORS as exc:
            raise _damaged(self._name, exc) from None
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._handle.close()
        self._tar.close()
        super().close()


def open_member(archive: str, member: str, path: str) -> IO[bytes]:
    """A buffered stream of one regular member (the archive stays open until it closes).

    `path` ("archive.tar:member") names it in errors. Raises TraceFormatError if the
    member is missing or not a regular file, or the archive is damaged.
    """
    tar = _open_checked(archive)
    try:
        info = tar.getmember(member)
        handle = tar.extractfile(info) if info.isfile() else None
    except KeyError:
        tar.close()
        raise TraceFormatError(path, "no such member in the tar archive") from None
    if handle is None:
        tar.close()
        raise TraceFormatError(path, "tar member is not a regular file")
    return cast(IO[bytes], io.BufferedReader(_Member(tar, cast(IO[bytes], handle), archive)))


def read_member(archive: str, member: str, path: str) -> bytes:
    """All bytes of one regular member (see `open_member`)."""
    with open_member(archive, member, path) as stream:
        return stream.read()
