"""Which input file is which rank's host ET or Kineto trace, told by header and name.

Each file's header says what it is (a host ET has `"schema"`, a Kineto trace
`traceEvents`/`schemaVersion`) and, for Kineto, its `distributedInfo.rank`; otherwise the
rank comes from the file name (`rank3`, `worker_3`, the last number).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lumos.converters.pytorch.json_stream import TraceFile, expand_inputs
from lumos.errors import TraceFormatError

_RANK_RE = (re.compile(r"rank[_\-.]?(\d+)", re.I), re.compile(r"worker[_\-]?(\d+)", re.I))
_HOST_RE = re.compile(rb'"schema"\s*:\s*"')
_KINETO_RE = re.compile(rb'"(traceEvents|schemaVersion)"')
_DIST_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^}]*?"rank"\s*:\s*(\d+)')
_WORLD = re.compile(rb'"world_size"\s*:\s*(\d+)')


@dataclass(slots=True)
class RankInputs:
    """The trace files of one rank (either may be missing) and the world size they state."""

    rank: int
    host: TraceFile | None = None
    kineto: TraceFile | None = None
    world_size: int = 0


def _sniff(source: TraceFile) -> tuple[str, int | None, int]:
    with source.open() as stream:
        head = stream.read(1 << 20)
    kind = "host" if _HOST_RE.search(head[:65536]) else "kineto" if _KINETO_RE.search(head) else ""
    if not kind:
        raise TraceFormatError(source.path, "neither a PyTorch host ET nor a Kineto trace")
    rank = _DIST_RANK.search(head)
    world = _WORLD.search(head)
    return kind, int(rank.group(1)) if rank else None, int(world.group(1)) if world else 0


def _name_rank(name: str) -> int | None:
    for pattern in _RANK_RE:
        match = pattern.search(name)
        if match:
            return int(match.group(1))
    numbers = re.findall(r"(\d+)", name.split(".")[0])
    return int(numbers[-1]) if numbers else None


def _refuse_chakra(paths: list[str | Path]) -> None:
    """Chakra ETs are converted already. Raises TraceFormatError naming the file."""
    for name in paths:
        p = Path(name)
        ets = [p] if p.is_file() else [*p.glob("*.et"), *p.glob("*.et.gz")] if p.is_dir() else []
        raw = p.is_dir() and any(p.glob("*.json*"))
        for et in ets:
            if et.name.endswith((".et", ".et.gz")) and not raw:
                raise TraceFormatError(
                    str(et),
                    "a Chakra ET (already converted): `lumos convert` reads PyTorch host ETs "
                    "and Kineto traces; give this to `lumos simulate`, `lumos et info` or "
                    "`lumos export astra-sim`",
                )


def plan(paths: list[str | Path]) -> list[RankInputs]:
    """Classify and pair the input files per rank. Raises TraceFormatError on a clash."""
    by_rank: dict[int, RankInputs] = {}
    _refuse_chakra(paths)
    files = expand_inputs(paths)
    if not files:
        raise TraceFormatError(
            ", ".join(map(str, paths)), "no PyTorch host ET or Kineto trace (.json[.gz]) found"
        )
    sniffed = [(f, *_sniff(f)) for f in files]
    for kind in ("kineto", "host"):
        same = [s for s in sniffed if s[1] == kind]
        for f, _, rank, world in same:
            if rank is None:
                rank = _name_rank(f.name) if len(same) > 1 else 0
            if rank is None:
                raise TraceFormatError(f.path, "cannot tell the rank; name files rank<N>...")
            entry = by_rank.setdefault(rank, RankInputs(rank))
            if getattr(entry, kind) is not None:
                raise TraceFormatError(f.path, f"two {kind} traces for rank {rank}")
            setattr(entry, kind, f)
            entry.world_size = max(entry.world_size, world)
    return [by_rank[r] for r in sorted(by_rank)]
