"""Giving freed heap memory back to the operating system between big numpy passes.

Decoding a rank allocates many short-lived arrays of a few MB. glibc's allocator raises
its mmap threshold after such arrays are freed, so later ones come from the heap and,
once freed, stay in the process's resident memory: loading a 1.26M-node rank kept ~2.5x
the memory its columns need. `trim()` asks glibc to return free heap pages
(`malloc_trim`); the pages given back fault in again when reused, so callers trim every
few passes, not after each (trimming after every 4 MB chunk halved the decoding speed,
and so did a low fixed mmap threshold). Elsewhere (no glibc) it does nothing.
"""

from __future__ import annotations

from functools import cache
from typing import Any

#: a graph of fewer nodes frees only a few MB of temporaries: not worth a trim
TRIM_MIN_NODES = 100_000


@cache
def _libc() -> Any:
    # glibc's soname first: `find_library` runs ldconfig in a subprocess, a fork of this
    # process (then gigabytes resident, and counted again as the child's peak)
    import ctypes  # on first use: small jobs never trim

    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        import ctypes.util  # imports subprocess: only where the soname differs

        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        except OSError:
            return None
    return libc if hasattr(libc, "malloc_trim") else None


def trim() -> None:
    """Return the heap's free pages to the operating system (glibc only)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
