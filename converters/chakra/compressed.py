"""Trace bytes opened the same way everywhere: plain or gzip, a file or a tar member.

Every reader (`.et` streams, host-ET and Kineto JSON, the simulator's one-pass tar load)
goes through `decompressing`, so gzip is detected by its magic bytes, not the file name,
and a truncated or corrupt gzip stream raises TraceFormatError naming the file instead of
a bare EOFError (which click would print as only "Aborted!"). A stream that expands
more than `limits.MAX_GZIP_RATIO` times its compressed size (a decompression bomb; real
traces compress 5-30x) is stopped with a ResourceLimitError.
"""

from __future__ import annotations

import gzip
import io
import zlib
from typing import IO, Any, cast

from lumos.errors import TraceFormatError
from lumos.limits import GZIP_RATIO_AFTER, MAX_GZIP_RATIO

GZIP_MAGIC = b"\x1f\x8b"
BUFFER_BYTES = 1 << 20


class _CheckedGzip(io.RawIOBase):
    """A gzip stream whose truncation or corruption raises TraceFormatError."""

    def __init__(self, inner: gzip.GzipFile, raw: IO[bytes], path: str) -> None:
        self._inner, self._raw, self._path = inner, raw, path
        self._out = 0
        self._start = raw.tell() if raw.seekable() else 0
        self._ratio = MAX_GZIP_RATIO.value

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        try:
            data = self._inner.read(size)
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceFormatError(self._path, f"truncated or corrupt gzip data: {exc}") from None
        self._out += len(data)
        if self._out > GZIP_RATIO_AFTER and self._raw.seekable():
            consumed = max(1, self._raw.tell() - self._start)
            if self._out > self._ratio * consumed:
                MAX_GZIP_RATIO.check(self._out // consumed, f"{self._path}: gzip expansion ratio")
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._inner.close()
        super().close()


def _head(raw: IO[bytes]) -> bytes:
    if hasattr(raw, "peek"):
        return cast(bytes, raw.peek(2)[:2])
    if raw.seekable():
        pos = raw.tell()
        head = raw.read(2)
        raw.seek(pos)
        return head
    return b""


def decompressing(raw: IO[bytes], path: str, buffer_bytes: int = BUFFER_BYTES) -> IO[bytes]:
    """`raw` itself, or a checked decompressing stream over it if it holds gzip data.

    `path` names the file in errors ("archive.tar:member" for a tar member).
    """
    if _head(raw) != GZIP_MAGIC:
        return raw
    checked = _CheckedGzip(gzip.GzipFile(fileobj=raw, mode="rb"), raw, path)
    return cast(IO[bytes], io.BufferedReader(checked, buffer_bytes))


def open_file(path: str) -> IO[bytes]:
    """Open a file for reading, decompressing it if it is gzip."""
    return decompressing(open(path, "rb"), path)
