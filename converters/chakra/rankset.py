"""Is a folder of `<prefix>.<rank>.et` files one complete, consistent job?

The framing of a `.et` file says nothing about the other ranks, so a set missing two
ranks, holding a stale rank of an earlier conversion, or a file renamed to another rank
would simulate as if it were whole. Files lumos writes state their `rank`, `world_size`
and `set_id` in the metadata; `check_rank_set` reads only the metadata of every file
and refuses a set whose ranks are missing, foreign (>= world size), mislabelled (name
and metadata disagree) or of two conversions. Foreign ETs without these attributes are
held to ranks 0..n-1 without gaps.
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from lumos.converters.chakra.archive import open_tar
from lumos.converters.chakra.compressed import decompressing
from lumos.converters.chakra.files import EtSource
from lumos.converters.chakra.stream import EtReader
from lumos.errors import RankSetError
from lumos.limits import MAX_RANKS
from lumos.proto import pb

META_RANK, META_WORLD, META_SET = "rank", "world_size", "set_id"


@dataclass(frozen=True, slots=True)
class RankHeader:
    """What one file's metadata says about its place in the job."""

    source: EtSource
    rank: int | None
    world_size: int | None
    set_id: str | None


def _int_attr(meta: pb.GlobalMetadata, name: str) -> int | None:
    for attr in meta.attr:
        if attr.name == name:
            which = attr.WhichOneof("value")
            if which in ("int64_val", "int32_val", "uint64_val", "uint32_val"):
                return int(getattr(attr, which))
    return None


def _str_attr(meta: pb.GlobalMetadata, name: str) -> str | None:
    for attr in meta.attr:
        if attr.name == name and attr.WhichOneof("value") == "string_val":
            return str(attr.string_val)
    return None


def header_of(source: EtSource, meta: pb.GlobalMetadata) -> RankHeader:
    """The rank-set fields of one file's metadata.

    Raises ResourceLimitError if the file's name or metadata states a rank or world size
    above `limits.MAX_RANKS` (a set is checked rank by rank against it).
    """
    rank, world = _int_attr(meta, META_RANK), _int_attr(meta, META_WORLD)
    MAX_RANKS.check(source.rank, f"{source.path}: rank in the file name")
    for value, what in ((rank, "rank"), (world, "world_size")):
        if value is not None:
            MAX_RANKS.check(value, f"{source.path}: metadata {what}")
    return RankHeader(source, rank, world, _str_attr(meta, META_SET))


def read_headers(sources: Sequence[EtSource]) -> list[RankHeader]:
    """Every source's header, reading only its metadata (a tar is scanned once).

    Raises TraceFormatError if a file's metadata cannot be read.
    """
    archived = [s for s in sources if s.archive is not None]
    heads: dict[str, pb.GlobalMetadata] = {}
    if archived:
        wanted = {s.member: s for s in archived}
        with open_tar(archived[0].archive or "") as tar:
            for member in tar:
                source = wanted.get(member.name)
                handle = tar.extractfile(member) if source is not None else None
                if source is None or handle is None:
                    continue
                raw = io.BufferedReader(handle, 1 << 16)  # type: ignore[type-var]
                with EtReader(source.path, stream=decompressing(raw, source.path)) as reader:
                    heads[source.path] = reader.metadata
    out = []
    for source in sources:
        meta = heads.get(source.path)
        if meta is None:
            with source.open() as reader:
                meta = reader.metadata
        out.append(header_of(source, meta))
    return out


def missing_ranks(present: Sequence[int], end: int) -> tuple[int, str]:
    """(how many, `0-2, 5`) of the ranks in [0, end) not in `present`, without listing
    them one by one (`end` may be a hostile world size); the text names 20 runs at most."""
    runs: list[tuple[int, int]] = []
    nxt = 0
    for r in sorted({p for p in present if 0 <= p < end}):
        if r > nxt:
            runs.append((nxt, r - 1))
        nxt = r + 1
    if nxt < end:
        runs.append((nxt, end - 1))
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs[:20])
    more = f" and {len(runs) - 20:,} more runs" if len(runs) > 20 else ""
    return sum(b - a + 1 for a, b in runs), text + more


def rank_ranges(ranks: Sequence[int]) -> str:
    """`0-2, 5` for [0, 1, 2, 5]."""
    parts: list[str] = []
    start = prev = None
    for r in sorted(ranks):
        if prev is not None and r == prev + 1:
            prev = r
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = r
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(parts)


def rank_set_problems(headers: Sequence[RankHeader]) -> tuple[list[str], list[str]]:
    """(errors, missing-rank problems) of a set; the second list is excusable by a flag."""
    errors: list[str] = []
    for h in headers:
        if h.rank is not None and h.rank != h.source.rank:
            errors.append(
                f"{h.source.path}: the file name says rank {h.source.rank} but its metadata "
                f"says rank {h.rank}"
            )
    worlds: dict[int, list[int]] = defaultdict(list)
    for h in headers:
        if h.world_size is not None:
            worlds[h.world_size].append(h.source.rank)
    if len(worlds) > 1:
        errors.append(
            "files disagree on the world size: "
            + "; ".join(f"ranks {rank_ranges(r)} say {w}" for w, r in sorted(worlds.items()))
        )
    ids: dict[str, list[int]] = defaultdict(list)
    for h in headers:
        if h.set_id is not None:
            ids[h.set_id].append(h.source.rank)
    if len(ids) > 1:
        errors.append(
            f"files of {len(ids)} different conversions are mixed (stale files of an earlier "
            "run?): " + "; ".join(f"ranks {rank_ranges(r)} have set_id {i}" for i, r in ids.items())
        )
    present = [h.source.rank for h in headers]
    where = headers[0].source.path if headers else ""
    world = max(worlds) if worlds else None
    missing: list[str] = []
    if world is not None:
        foreign = [r for r in present if r >= world]
        if foreign:
            errors.append(
                f"rank(s) {rank_ranges(foreign)} are outside the job's world size {world} "
                f"(e.g. {where})"
            )
        count, text = missing_ranks(present, world)
        if count:
            missing.append(f"{count:,} of {world:,} ranks are missing: {text} (next to {where})")
    elif present:
        count, text = missing_ranks(present, max(present) + 1)
        if count:
            missing.append(
                f"ranks {text} are missing between 0 and {max(present)} (next to {where})"
            )
    return errors, missing


def check_rank_set(
    sources: Sequence[EtSource],
    *,
    allow_partial: bool = False,
    ranks: frozenset[int] | None = None,
) -> list[str]:
    """Refuse an incomplete or inconsistent set; returns the excused problems as warnings.

    `ranks`: an explicit subset is wanted; ranks of the set outside it may be missing,
    but every rank asked for must be there. Raises RankSetError listing every problem
    (missing ranks only without `allow_partial` or `ranks`), TraceFormatError if a
    file's metadata cannot be read.
    """
    errors, missing = rank_set_problems(read_headers(sources))
    if ranks is not None:
        present = {s.rank for s in sources}
        absent = sorted(ranks - present)
        if absent:
            where = sources[0].path if sources else ""
            errors.append(
                f"rank(s) {rank_ranges(absent)} asked for are not in the set (it holds ranks "
                f"{rank_ranges(sorted(present))}, next to {where})"
            )
        missing = []
    if not allow_partial:
        errors += [m + "; pass --allow-partial to use the ranks present" for m in missing]
    if errors:
        raise RankSetError(errors)
    return missing
