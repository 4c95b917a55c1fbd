"""Which input file is which rank's host ET or Kineto trace, told by header and name.

Each file's header says what it is (a host ET has `"schema"`, a Kineto trace
`traceEvents`/`schemaVersion`) and, for Kineto, its `distributedInfo.rank`; otherwise the
rank comes from the file name (`rank3`, `worker_3`, the last number when several files
are given). A name that says `rank<N>`/`worker<N>` and a header that says another rank
is an error naming both, never a guess; so are world sizes or ranks beyond
`limits.MAX_RANKS`, and inputs holding no trace at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lumos.converters.chakra.rankset import missing_ranks, rank_ranges
from lumos.converters.pytorch.json_stream import TraceFile, expand_inputs
from lumos.errors import LinkError, TraceFormatError
from lumos.limits import MAX_RANKS

_RANK_RE = (re.compile(r"rank[_\-.]?(\d+)", re.I), re.compile(r"worker[_\-]?(\d+)", re.I))
_HOST_RE = re.compile(rb'"schema"\s*:\s*"')
_KINETO_RE = re.compile(rb'"(traceEvents|schemaVersion)"')
_DIST_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^}]*?"rank"\s*:\s*(\d+)')
_WORLD = re.compile(rb'"world_size"\s*:\s*(\d+)')


#: A bare number in a file name above this is not taken for a rank (pids, timestamps).
PLAUSIBLE_RANK = 65535


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
    found = int(rank.group(1)) if rank else None
    size = int(world.group(1)) if world else 0
    MAX_RANKS.check(size, f"{source.path}: distributedInfo.world_size")
    if found is not None:
        MAX_RANKS.check(found, f"{source.path}: distributedInfo.rank")
    return kind, found, size


def _explicit_rank(name: str) -> int | None:
    """The rank a file name states outright (`rank3`, `worker_3`)."""
    for pattern in _RANK_RE:
        match = pattern.search(name)
        if match:
            return int(match.group(1))
    return None


def _name_rank(name: str) -> int | None:
    explicit = _explicit_rank(name)
    if explicit is not None:
        return explicit
    numbers = re.findall(r"(\d+)", name.split(".")[0])
    return int(numbers[-1]) if numbers else None


def _rank_of(f: TraceFile, kind: str, header_rank: int | None, several: bool) -> int:
    named = _explicit_rank(f.name)
    if header_rank is not None and named is not None and named != header_rank:
        raise TraceFormatError(
            f.path,
            f"the file name says rank {named} but distributedInfo.rank says {header_rank}; "
            "rename the file or fix the trace",
        )
    rank = header_rank
    if rank is None:
        # One file alone is rank 0 unless its name says otherwise; several need names.
        rank = _name_rank(f.name) if several else (0 if named is None else named)
        if rank is not None and named is None and rank > PLAUSIBLE_RANK:
            raise TraceFormatError(
                f.path,
                f"the number {rank} in the file name looks like a process id or a time, not "
                "a rank; name the files rank<N> (or convert unrelated traces one by one)",
            )
    if rank is None:
        raise TraceFormatError(
            f.path, f"cannot tell the rank of this {kind} trace; name it rank<N>"
        )
    return MAX_RANKS.check(rank, f"{f.path}: rank")


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


def check_coverage(inputs: list[RankInputs], allow_host_only: bool) -> list[str]:
    """Kineto traces for some ranks only: an error, or (allowed) one counted warning.

    Raises LinkError naming the ranks without a Kineto trace.
    """
    with_kineto = [i.rank for i in inputs if i.kineto is not None]
    host_only = [i.rank for i in inputs if i.kineto is None]
    if not with_kineto or not host_only:
        return []
    text = (
        f"{len(host_only)} of {len(inputs)} ranks have a host ET but no Kineto trace "
        f"(ranks {host_only[:16]}{' ...' if len(host_only) > 16 else ''})"
    )
    if not allow_host_only:
        raise LinkError(
            f"{text}; give their Kineto traces, or pass --allow-host-only to estimate "
            "those ranks' durations with the cost model"
        )
    return [f"{text}: their durations are estimated, not measured"]


def check_subset(inputs: list[RankInputs], world: int) -> list[str]:
    """A job's ranks without any trace among the inputs (a rank's files left out, or a
    sampled capture): one warning naming them and how to simulate the ranks given."""
    present = [i.rank for i in inputs]
    count, text = missing_ranks(present, world)
    if not count:
        return []
    return [
        f"no trace for {count:,} of the job's {world:,} ranks ({text}): the set holds ranks "
        f"{rank_ranges(present)} only; simulate it with --ranks or --allow-partial"
    ]


def plan(paths: list[str | Path]) -> list[RankInputs]:
    """Classify and pair the input files per rank.

    Raises TraceFormatError on a clash, a rank mislabel or inputs without any trace.
    """
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
        for f, _, header_rank, world in same:
            rank = _rank_of(f, kind, header_rank, len(same) > 1)
            entry = by_rank.setdefault(rank, RankInputs(rank))
            if getattr(entry, kind) is not None:
                raise TraceFormatError(f.path, f"two {kind} traces for rank {rank}")
            setattr(entry, kind, f)
            entry.world_size = max(entry.world_size, world)
    return [by_rank[r] for r in sorted(by_rank)]
