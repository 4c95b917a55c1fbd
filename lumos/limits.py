"""Upper bounds on what input can make lumos allocate, each overridable from the environment.

A hostile or corrupt trace can claim a billion ranks, a 3 GB protobuf frame or a gzip
stream that expands a thousandfold. Every reader asks `check` before it sizes anything
by such a number; the error names the limit's environment variable, so a genuine giant
input is one `export LUMOS_MAX_...=N` away from working.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lumos.errors import ResourceLimitError


@dataclass(frozen=True, slots=True)
class Limit:
    """One bound: what it limits, its default, and the variable that overrides it."""

    env: str
    default: int
    what: str

    @property
    def value(self) -> int:
        raw = os.environ.get(self.env)
        if raw is None:
            return self.default
        try:
            return int(raw)
        except ValueError:
            return self.default

    def check(self, value: int, what: str | None = None) -> int:
        """`value` itself. Raises ResourceLimitError if it is above the limit."""
        limit = self.value
        if value > limit:
            raise ResourceLimitError(what or self.what, value, limit, self.env)
        return value


#: ranks of one job (world size, rank numbers, process-group members).
MAX_RANKS = Limit("LUMOS_MAX_RANKS", 1 << 17, "world size")
#: bytes of one protobuf frame of a `.et` stream (protobuf itself stops at 2 GiB).
MAX_FRAME_BYTES = Limit("LUMOS_MAX_FRAME_BYTES", 256 << 20, "size of one .et frame (bytes)")
#: decompressed / compressed bytes of a gzip input, checked once past `GZIP_RATIO_AFTER`.
MAX_GZIP_RATIO = Limit("LUMOS_MAX_GZIP_RATIO", 200, "gzip expansion ratio")
GZIP_RATIO_AFTER = 64 << 20
#: ASTRA-sim `active-chunks-per-dimension` and `preferred-dataset-splits`.
MAX_CHUNKS = Limit("LUMOS_MAX_CHUNKS", 4096, "chunks per collective")


def all_limits() -> tuple[Limit, ...]:
    """Every limit, for the documentation and `--help`."""
    return (MAX_RANKS, MAX_FRAME_BYTES, MAX_GZIP_RATIO, MAX_CHUNKS)
