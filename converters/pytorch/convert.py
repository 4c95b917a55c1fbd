"""The conversion driver: host ETs + Kineto traces of every rank → `<prefix>.<rank>.et`.

Inputs are classified by their header (host ET or Kineto), given a rank (Kineto's
`distributedInfo`, else the file name), paired per rank, then each rank is loaded,
linked, built and written in turn, so only one rank's trace is in memory at a time.
After all ranks, every process group's collective sequence is compared across ranks.

The set appears all at once (`publish`): ranks are written into a staging folder that
replaces the output only when every rank is done, and rank files of an earlier
conversion with the same prefix are removed, so a killed run leaves no partial set and
stale ranks never mix in. Each file states its rank, the world size, its node count
and the conversion's `set_id`.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np

from lumos import __version__
from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.archive import open_tar
from lumos.converters.chakra.attrs import make_attr
from lumos.converters.chakra.set_output import rank_set_output
from lumos.converters.pytorch import forked
from lumos.converters.pytorch.acyclic import check_acyclic
from lumos.converters.pytorch.comm import CommRecord, check_sequences, groups_from
from lumos.converters.pytorch.comm_tasks import CommContext
from lumos.converters.pytorch.exec_graph import build_tasks, cpu_segments
from lumos.converters.pytorch.flatten import Segments
from lumos.converters.pytorch.host_et import HostTrace, load_host_et
from lumos.converters.pytorch.host_graph import build_host_tasks
from lumos.converters.pytorch.inputs import RankInputs, check_coverage, check_subset, plan
from lumos.converters.pytorch.json_stream import TraceFile
from lumos.converters.pytorch.kineto import KinetoTrace, load_kineto
from lumos.converters.pytorch.link import LinkReport, check_link_rate, link
from lumos.converters.pytorch.publish import set_id_of
from lumos.converters.pytorch.rank_summary import ConvertResult, RankSummary
from lumos.converters.pytorch.step_agreement import AGREED, common_step, disagreement
from lumos.converters.pytorch.steps import STEP_PREFIX, StepWindow, choose_step, resolve_step
from lumos.converters.pytorch.tasks import TaskKind, TaskTable, finalize
from lumos.converters.pytorch.writer import NodeSource, metadata, write_et_file
from lumos.errors import TraceFormatError
from lumos.limits import MAX_RANKS
from lumos.progress import report
from lumos.staging import safe_name

log = logging.getLogger(__name__)

#: below this share of host ops linked to Kineto events, the two files are taken to come
#: from different runs (or steps) and the conversion is refused; matched captures link
#: 97-100 % (see tests), host ETs paired with another run's Kineto trace 7-20 %.
MIN_LINK_RATE = 0.5


def convert(
    paths: list[str | Path],
    out_dir: str | Path,
    *,
    prefix: str = "trace",
    step: int | str | None = None,
    on_rank: Callable[[RankSummary], None] | None = None,
    jobs: int = 1,
    min_link_rate: float = MIN_LINK_RATE,
    allow_host_only: bool = False,
    force: bool = True,
) -> ConvertResult:
    """Convert every rank's traces and write `<out_dir>/<prefix>.<rank>.et`.

    `step`: the ProfilerStep number to convert, "median" for the typical one of a
    multi-step capture (same on every rank), None for the last complete one. `jobs` > 1
    converts that many ranks at once in worker processes (each then runs on one core);
    with 1, ranks go one after another and a big rank uses two processes.
    Raises LinkError when a rank's host ET links fewer than `min_link_rate` of its ops
    to its Kineto trace (0 accepts any rate), before that rank's file is written, and
    if Kineto traces cover only some ranks (unless `allow_host_only`:
    those ranks' durations are then estimated, and counted in `problems`),
    OutputError if the set cannot be written (nothing is then changed in `out_dir`), or
    `out_dir` already holds `<prefix>.*.et` files and `force` is off, or lumos did not
    write them (`converters.chakra.set_output`).
    """
    safe_name(prefix)
    inputs = plan(paths)
    step = resolve_step(step, [i.kineto for i in inputs if i.kineto is not None])
    report("convert", 0, len(inputs), "ranks")
    log.info(
        "convert: %d rank(s): %s",
        len(inputs),
        ", ".join(
            f"{i.rank} ({'host ET' if i.host else ''}"
            f"{' + ' if i.host and i.kineto else ''}{'Kineto' if i.kineto else ''})"
            for i in inputs
        ),
    )
    world = max([i.world_size for i in inputs] + [max(i.rank for i in inputs) + 1])
    MAX_RANKS.check(world)
    result = ConvertResult()
    result.problems += check_coverage(inputs, allow_host_only) + check_subset(inputs, world)
    records: list[CommRecord] = []
    all_groups: dict[str, tuple[int, ...]] = {}
    out = Path(out_dir)
    with rank_set_output(out, prefix, force=force) as stage:
        set_id = set_id_of(inputs, world, step, prefix)
        job = _Job(world, stage, prefix, step, set_id, min_link_rate)
        recs_of: dict[int, list[CommRecord]] = {}
        for summary, recs, groups in _each_rank(inputs, job, jobs):
            result.ranks.append(summary)
            recs_of[summary.rank] = recs
            all_groups.update(groups)
            report("convert", len(result.ranks), len(inputs), "ranks")
            log.info("rank %d: %d nodes -> %s", summary.rank, summary.nodes, summary.path)
        agreed = common_step(result.ranks) if step is None else None
        if agreed is not None:  # the ranks fell back to different steps: convert one
            chosen = {x.rank: x.step for x in result.ranks}
            redo = [i for i in inputs if i.kineto and chosen[i.rank] != f"{STEP_PREFIX}{agreed}"]
            again = {
                s.rank: (s, r) for s, r, _ in _each_rank(redo, replace(job, step=agreed), jobs)
            }
            for k, summary in enumerate(result.ranks):
                if summary.rank in again:
                    result.ranks[k], recs_of[summary.rank] = again[summary.rank]
                    result.ranks[k].step_chosen_by = AGREED
        result.problems += [line] if (line := disagreement(result.ranks)) else []
        for summary in result.ranks:
            summary.path = str(out / Path(summary.path).name)
            result.problems += [f"rank {summary.rank}: {n}" for n in summary.notes]
            records += recs_of[summary.rank]
            if on_rank is not None:
                on_rank(summary)
    if len(inputs) > 1:
        from lumos.converters.pytorch.comm import ProcessGroup

        pgs = {k: ProcessGroup(k, "", v) for k, v in all_groups.items()}
        result.problems += check_sequences(records, pgs)
    return result


@dataclass(frozen=True, slots=True)
class _Job:
    """What every rank of one conversion shares."""

    world: int
    out_dir: Path
    prefix: str
    step: int | None
    set_id: str
    min_link_rate: float = MIN_LINK_RATE


_RankResult = tuple["RankSummary", list[CommRecord], dict[str, tuple[int, ...]]]


def _each_rank(inputs: list[RankInputs], job: _Job, jobs: int) -> Iterator[_RankResult]:
    """Every rank's result, in rank order.

    Pool workers die with this process; an error or interrupt here kills them at once
    instead of waiting for the ranks they are converting.
    """
    if jobs <= 1 or len(inputs) < 2 or not forked.available():
        for item in inputs:
            yield convert_rank(item, job)
        return
    yield from forked.ordered_map(partial(convert_rank, job=job, parallel=False), inputs, jobs)


def convert_rank(
    item: RankInputs, job: _Job, parallel: bool = True
) -> tuple[RankSummary, list[CommRecord], dict[str, tuple[int, ...]]]:
    """Convert one rank; returns its summary, its comm records and its process groups.

    With `parallel`, a big rank uses a second process (Kineto load, half the encoding).
    Raises LinkError when the link rate is below the job's `min_link_rate` (nothing written).
    """
    with _gc_paused():
        return _convert_rank(item, job, parallel)


def _trim() -> None:
    """Give freed heap memory back to the OS (glibc), so later peaks start lower."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Millions of small containers, none cyclic: the cyclic GC would only rescan them."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


#: inputs at least this big (JSON bytes) use a second process when one is available.
PARALLEL_MIN_BYTES = 32 << 20


def _json_bytes(source: TraceFile | None) -> int:
    if source is None:
        return 0
    if source.archive is not None:
        with open_tar(source.archive) as tar:
            size = tar.getmember(source.member or "").size
    else:
        size = os.path.getsize(source.path)
    return size * 8 if source.name.endswith(".gz") else size


def _kineto_side(source: TraceFile, step: int | None) -> tuple[KinetoTrace, StepWindow, Segments]:
    """What needs only the Kineto trace: load it, choose the step, flatten its threads."""
    trace = load_kineto(source)
    window = choose_step(trace, source.path, step)
    return trace, window, cpu_segments(trace, window).compact()


def _convert_rank(
    item: RankInputs, job: _Job, parallel: bool
) -> tuple[RankSummary, list[CommRecord], dict[str, tuple[int, ...]]]:
    world, step = job.world, job.step
    sources = [f.path for f in (item.host, item.kineto) if f is not None]
    big = _json_bytes(item.host) + _json_bytes(item.kineto) >= PARALLEL_MIN_BYTES
    split = parallel and big and forked.available()
    pending = None
    if split and item.host is not None and item.kineto is not None:
        pending = forked.start(_kineto_side, item.kineto, step)
    try:
        host: HostTrace | None = load_host_et(item.host) if item.host else None
    except BaseException:
        if pending is not None:
            pending.kill()
        raise
    report = None
    trace = None
    if item.kineto is not None:
        trace, window, segs = (
            pending.result() if pending is not None else _kineto_side(item.kineto, step)
        )
        _trim()
        pgs = groups_from(host.process_groups if host else [], trace.distributed, world)
        groups = {k: v.ranks for k, v in pgs.items()}
        host_row = None
        if host is not None:
            linked = link(host, trace)
            host_row, report = linked.host_row, linked.report
            check_link_rate(item.rank, sources, report, job.min_link_rate)
        ctx = CommContext(item.rank, world, groups, host)
        table = build_tasks(trace, window, host_row, ctx, segs)
        step_start, step_name = window.start, window.name
        step_ns = window.end - window.start if window.measured else None
        estimated = False
    else:
        assert host is not None
        groups = {k: v.ranks for k, v in groups_from(host.process_groups, {}, world).items()}
        table, step_name = build_host_tasks(host, CommContext(item.rank, world, groups, host))
        step_start, step_ns, estimated = 0, None, True
    if len(table) == 0:
        # An ET without nodes is rejected by every reader; say why instead of writing one.
        raise TraceFormatError(
            ", ".join(sources),
            f"rank {item.rank}: nothing to convert in {step_name or 'the trace'} "
            "(no host ops, runtime calls or GPU events)",
        )
    finalize(table, step_start)
    _trim()
    path = job.out_dir / f"{job.prefix}.{item.rank}.et"
    check_acyclic(table, item.rank, f"{job.prefix}.{item.rank}.et", sources)
    # The step's absolute start on the Kineto clock (its `ts` plus the trace's base time)
    # lets the simulator align ranks that entered the step at different times
    # (host-ET-only input has no common clock).
    meta = metadata(
        item.rank,
        world,
        groups,
        step_ns,
        sources,
        f"lumos {__version__}",
        step_start_ns=step_start + trace.base_ns if trace is not None else None,
    )
    meta.attr.extend(
        [make_attr(cv.META_NODE_COUNT, len(table)), make_attr(cv.META_SET_ID, job.set_id)]
    )
    write_et_file(path, meta, NodeSource(table, step_start, estimated, trace, host), split)
    summary = _summary(item.rank, str(path), table, step_name, step_ns, report, sources)
    if trace is not None:
        summary.steps, summary.step_chosen_by = window.steps, window.chosen_by
        if trace.unpaired_events:
            summary.notes.append(
                f"{trace.path}: {trace.unpaired_events} 'B'/'E' duration event(s) without a "
                f"partner on their thread were not read ({trace.paired_events} pairs were)"
            )
    for guess, count in table.counts.get("comm_guesses", {}).items():
        summary.notes.append(f"{', '.join(sources)}: {count} communication op(s): {guess}")
    if host is not None and host.declared_schema != host.schema.version:
        summary.notes.append(
            f"{item.host.path if item.host else ''}: host-ET schema "
            f"{host.declared_schema!r} is not one lumos lists; read as "
            f"{host.schema.version}, the closest it knows"
        )
    return summary, _records(item.rank, table), groups


def _records(rank: int, table: TaskTable) -> list[CommRecord]:
    out = []
    ids = np.empty(len(table), np.int64)
    ids[table.order] = np.arange(1, len(table) + 1)
    for t in np.flatnonzero(table.kind == TaskKind.COLL).tolist():
        attrs = table.attrs.get(t, {})
        out.append(
            CommRecord(
                rank,
                str(attrs.get("pg_name", "")),
                int(attrs.get("comm_seq", 0)),
                int(attrs.get("comm_type", 0)),
                int(attrs.get("comm_size", 0)),
                table.name_of(t),
                int(ids[t]),
            )
        )
    out.sort(key=lambda r: (r.pg_name, r.seq))
    return out


def _summary(
    rank: int,
    path: str,
    table: TaskTable,
    step: str,
    step_ns: int | None,
    report: LinkReport | None,
    sources: list[str],
) -> RankSummary:
    counts = np.bincount(table.kind.astype(np.int64), minlength=len(TaskKind))
    return RankSummary(
        rank=rank,
        path=path,
        nodes=len(table),
        cpu=int(counts[TaskKind.CPU]),
        gpu=int(counts[TaskKind.GPU]),
        comm=len(table) - int(counts[TaskKind.CPU]) - int(counts[TaskKind.GPU]),
        step=step,
        step_ns=step_ns,
        link=report,
        unknown_comm=sum(1 for a in table.attrs.values() if a.get("_unknown_comm")),
        sources=sources,
        syncs=dict(table.counts.get("syncs", {})),
        graph_launches=dict(table.counts.get("graphs", {})),
        p2p_batches=dict(table.counts.get("p2p_batches", {})),
        gpu_records=dict(table.counts.get("gpu_records", {})),
    )
