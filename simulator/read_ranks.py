"""Reading every rank's `.et` into a `RankGraph`, on all cores where it pays.

Work is cut into parts: a rank each, and when there are fewer big ranks than cores, a
rank's plain (uncompressed) file into byte ranges (`et_columns.read_columns` with
`start`/`stop`: each part follows the frames from the top of the file and decodes the
ones that start in its range). Parts run in worker processes (forked, so nothing is
imported again) and come back as arrays; a rank read in several parts is merged and
assembled here. Small jobs, tar archives and single-core machines read in this process.
Results are identical whichever way a rank was read.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lumos.converters.chakra.archive import open_tar, read_member
from lumos.converters.chakra.compressed import GZIP_MAGIC, decompressing, open_file
from lumos.converters.chakra.files import EtSource
from lumos.errors import TraceFormatError
from lumos.simulator.et_columns import Columns, check_stated, read_columns
from lumos.simulator.graph import RankGraph
from lumos.simulator.graph_columns import graph_from_columns, parse_metadata, read_graph

if TYPE_CHECKING:  # process pools load only when a job is read in parallel
    from concurrent.futures import Executor, Future

#: below this many bytes in all, every rank is read in this process
PARALLEL_BYTES = 48 << 20
#: a rank's file is split only into parts of at least this many bytes
PART_BYTES = 32 << 20
MAX_WORKERS = 8


def workers() -> int:
    """Worker processes to use: the cores this process may run on."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS))


def read_sources(
    sources: list[EtSource], repair: bool, jobs: int | None = None
) -> Iterator[tuple[EtSource, RankGraph]]:
    """Each source's graph, in order (see the module docstring).

    Raises TraceFormatError for unreadable files, duplicate ids, or dangling
    dependencies (unless `repair`).
    """
    archives = {s.archive for s in sources if s.archive is not None}
    if len(archives) == 1 and len(sources) > 1:
        yield from _read_tar(sources, archives.pop(), repair)
        return
    jobs = workers() if jobs is None else jobs
    sizes = [_plain_size(s) for s in sources]
    total = sum(Path(s.path).stat().st_size for s in sources if s.archive is None)
    if jobs < 2 or total < PARALLEL_BYTES:
        for source in sources:
            yield source, _read_source(source, repair)
        return
    for source in sources:  # workers decode their byte ranges whatever the header says
        if source.archive is None:
            with source.open() as reader:
                check_stated(reader.node_count, source.path)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(jobs, mp_context=context) as pool:
        futures = [
            _submit(pool, s, size, jobs, len(sources), repair)
            for s, size in zip(sources, sizes, strict=True)
        ]
        for source, parts in zip(sources, futures, strict=True):
            yield source, _collect(source, parts, repair)
            parts.clear()


def _plain_size(source: EtSource) -> int:
    """Bytes of an uncompressed file on disk (0 for tar members and gzip files)."""
    if source.archive is not None:
        return 0
    with open(source.path, "rb") as handle:
        if handle.read(2) == GZIP_MAGIC:
            return 0
    return Path(source.path).stat().st_size


def _submit(
    pool: Executor, source: EtSource, size: int, jobs: int, ranks: int, repair: bool
) -> list[Future[Any] | _Local]:
    parts = min(max(1, jobs // ranks), max(1, size // PART_BYTES))
    if parts == 1:
        return [pool.submit(_in_worker, _read_source, source, repair)]
    cuts = [size * k // parts for k in range(parts + 1)]
    # the first part is read here, by `_collect`, while the workers read the others
    later = [
        pool.submit(
            _in_worker, _read_part, source.path, cuts[k], cuts[k + 1] if k + 1 < parts else None
        )
        for k in range(1, parts)
    ]
    return [_Local(source.path, cuts[1]), *later]


class _Local:
    """The first part of a split file, read in this process when collected."""

    def __init__(self, path: str, stop: int) -> None:
        self.path, self.stop = path, stop

    def result(self) -> tuple[bytes, Columns]:
        return _read_part(self.path, 0, self.stop)


def _in_worker(read: Callable[..., Any], *args: Any) -> Any:
    """`read(*args)` in a worker; a TraceFormatError comes back as a `_Failed` (it does
    not survive pickling as itself)."""
    try:
        return read(*args)
    except TraceFormatError as exc:
        return _Failed(exc.path, str(exc), exc.where)


class _Failed:
    """A TraceFormatError raised in a worker, to raise again here."""

    def __init__(self, path: str, text: str, where: str | None) -> None:
        self.path, self.text, self.where = path, text, where

    def error(self) -> TraceFormatError:
        loc = self.path + (f" ({self.where})" if self.where else "")
        message = self.text.removeprefix(f"{loc}: ")
        return TraceFormatError(self.path, message, where=self.where)


def _result(part: Future[Any] | _Local) -> Any:
    out = part.result()
    if isinstance(out, _Failed):
        raise out.error()
    return out


def _collect(source: EtSource, parts: list[Future[Any] | _Local], repair: bool) -> RankGraph:
    first = _result(parts[0])
    if isinstance(first, RankGraph):
        return first
    assert isinstance(first, tuple)
    head, cols = first
    for part in parts[1:]:
        more = _result(part)
        assert isinstance(more, tuple)
        cols.extend(more[1])
    return graph_from_columns(
        source.rank, parse_metadata(head, source.path), cols, source.path, repair
    )


def _read_part(path: str, start: int, stop: int | None) -> tuple[bytes, Columns]:
    with open_file(path) as stream:
        return read_columns(stream, path, start, stop)


def _read_source(source: EtSource, repair: bool) -> RankGraph:
    if source.archive is None:
        stream = open_file(source.path)
    else:
        raw = read_member(source.archive, source.member or "", source.path)
        stream = decompressing(io.BytesIO(raw), source.path)
    with stream:
        return read_graph(source.rank, stream, source.path, repair)


def _read_tar(
    sources: list[EtSource], archive: str, repair: bool
) -> Iterator[tuple[EtSource, RankGraph]]:
    """The members of one tar from one pass over it (opening it per rank rescans its
    index every time)."""
    wanted = {s.member: s for s in sources}
    data: dict[str, bytes] = {}
    with open_tar(archive) as tar:
        for member in tar:
            if member.name in wanted and member.isfile():
                handle = tar.extractfile(member)
                if handle is not None:
                    data[member.name] = handle.read()
    for source in sources:
        raw = data.pop(source.member or "", None)
        if raw is None:
            yield source, _read_source(source, repair)
            continue
        with decompressing(io.BytesIO(raw), source.path) as stream:
            yield source, read_graph(source.rank, stream, source.path, repair)
