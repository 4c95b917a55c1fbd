"""Flattening the simulated ranks into one global plan the scheduler runs: numpy arrays.

Node `i` of simulated slot `k` becomes global node `offsets[k] + i`; processors likewise.
Here each node gets its duration for the mode, its processor, its role (plain, collective,
send, receive, runtime sync), and its dependency counters; edges become successor lists
with a flag saying whether the edge *enqueues* the node. A GPU op launched by a CPU call
enters its stream's FIFO when that launch completes and then waits at the head for its
other dependencies (its same-stream predecessor is implied by the FIFO and dropped);
every other node enters its processor's queue when all its dependencies are done.
All ranks are concatenated first and handled in one pass of array operations, so the
cost does not grow with the number of ranks beyond their nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from lumos.simulator.graph import COLL, RECV, SEND, RankGraph, SyncKind
from lumos.simulator.processors import Assignment
from lumos.simulator.result import ProcKind

PLAIN, COLLECTIVE, P2P_SEND, P2P_RECV, SYNC_WAIT, EVENT_RECORD, STREAM_WAIT, LAUNCH = range(8)
_KINDS = list(ProcKind)
_CPU, _GPU = _KINDS.index(ProcKind.CPU), _KINDS.index(ProcKind.GPU)
_SYNC_ROLE = np.full(max(SyncKind) + 1, SYNC_WAIT, np.int64)
_SYNC_ROLE[SyncKind.EVENT_RECORD] = EVENT_RECORD
_SYNC_ROLE[SyncKind.STREAM_WAIT_EVENT] = STREAM_WAIT


@dataclass(slots=True)
class Plan:
    """Everything the scheduler needs, indexed by global node/processor.

    Per node (numpy arrays, length n): `dur` (int64, ns; communication is timed per
    instance instead), `gap`, `proc`, `role`, `indeg` / `enq` (dependency counts: all,
    and those that enqueue the node), `wait_in_gap`, `match` (instance id, -1: none;
    filled with `inst_dur`/`inst_members` by the caller). Successors in CSR form:
    `succ[succ_ptr[v]:succ_ptr[v + 1]]` = `4 * node + 2 * sole + enqueues`, `sole` when
    the edge is the node's only dependency (then no counter needs decrementing).

    `slot_start[k]`: when simulated slot k starts its step (ns; empty = all at 0); its
    nodes with no enqueueing dependency enter their queues then, and a thread's first
    gap counts from it. `wait_in_gap[v]`: v is communication on a CPU thread, where the
    wait for peers happens after the recorded op (gloo's `work.wait()` is not traced), so
    the recorded gap before the next op on the thread already holds that wait: the next
    op's gap counts from v's end minus its simulated wait (the two overlap).
    `early[v]`: for a LAUNCH node v, (edge id, latency) of the GPU ops it lets onto their
    stream *before* it returns — a blocking call (a pageable or synchronous copy) whose
    op started, as recorded, `latency` ns after the call started and before it ended;
    `early_dst[edge id]` is that op. Other launches enqueue their op when they end.

    `inst_exit[m]`: None when every member of instance m leaves at its last arrival +
    `inst_dur[m]`; else each member's own time after the last arrival, in the order of
    `inst_members[m]` (replay keeps the recorded exits; a pricer may give its own).
    `free_at`: (processor, time) of streams still busy at the step start with work
    queued before it (`lumos.simulator.backlog`); they take no node until then.
    """

    offsets: list[int]
    proc_offsets: list[int]
    dur: np.ndarray
    gap: np.ndarray
    proc: np.ndarray
    role: np.ndarray
    succ_ptr: np.ndarray
    succ: np.ndarray
    indeg: np.ndarray
    enq: np.ndarray
    unlimited: list[bool]
    is_stream: list[bool]
    by_id: bool
    match: np.ndarray
    wait_in_gap: np.ndarray
    inst_dur: list[int] = field(default_factory=list)
    inst_members: list[list[int]] = field(default_factory=list)
    inst_exit: list[list[int] | None] = field(default_factory=list)
    free_at: list[tuple[int, int]] = field(default_factory=list)
    #: astra mode: per instance, arrival times -> per-member finish times (None: together)
    inst_finish: list[Callable[[Sequence[int]], list[int]] | None] = field(default_factory=list)
    sync_args: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    stream_of: list[dict[int, int]] = field(default_factory=list)
    slot_start: list[int] = field(default_factory=list)
    early: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    early_dst: list[int] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.dur)


def compute_durations(g: RankGraph, astra: bool) -> np.ndarray:
    """Per-node duration for compute/bookkeeping nodes in ns (comm is priced per instance)."""
    if astra:
        return np.where(g.dur_us_ns > 0, g.dur_us_ns, 1)
    return np.maximum(g.dur_ns, 0)


@dataclass(slots=True)
class _Job:
    """The simulated ranks' node arrays concatenated (global node and processor ids)."""

    graphs: Sequence[RankGraph]
    sizes: np.ndarray
    offsets: np.ndarray
    proc: np.ndarray
    pkind: np.ndarray
    on_stream: np.ndarray

    def cat(self, name: str) -> np.ndarray:
        return np.concatenate([getattr(g, name) for g in self.graphs])


def _job(graphs: Sequence[RankGraph], assignments: Sequence[Assignment]) -> _Job:
    sizes = np.asarray([len(g) for g in graphs], np.int64)
    offsets = np.zeros(len(graphs) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    n_procs = np.asarray([len(a.processors) for a in assignments], np.int64)
    proc_base = np.repeat(np.cumsum(n_procs) - n_procs, sizes)
    proc = np.concatenate([a.proc for a in assignments]).astype(np.int64) + proc_base
    kinds = np.asarray([_KINDS.index(p.kind) for a in assignments for p in a.processors], np.int8)
    on_stream = np.concatenate(
        [
            a.on_stream if a.on_stream is not None else g.stream >= 0
            for g, a in zip(graphs, assignments, strict=True)
        ]
    )
    return _Job(graphs, sizes, offsets, proc, kinds[proc], on_stream)


def _edges(job: _Job, ablate: bool, native: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All kept edges (src, dst, enqueue flag), global node ids, in dependency order."""
    dep_ptr = [g.dep_ptr for g in job.graphs]
    n = int(job.offsets[-1])
    counts = np.concatenate([np.diff(p) for p in dep_ptr])
    dst = np.repeat(np.arange(n, dtype=np.int64), counts)
    per_rank = np.asarray([int(p[-1]) for p in dep_ptr], np.int64)
    src = job.cat("dep_idx").astype(np.int64) + np.repeat(job.offsets[:-1], per_rank)
    pk, proc = job.pkind, job.proc
    keep = np.ones(len(src), bool)
    if ablate:
        gpu_src = pk[src] == _GPU
        keep &= ~(gpu_src & ((pk[dst] == _CPU) | ((pk[dst] == _GPU) & (proc[src] != proc[dst]))))
    flag = np.ones(len(src), bool)
    if native:
        cpu_src = (pk[src] == _CPU) & keep
        launched = np.zeros(n, bool)
        launched[dst[cpu_src & job.on_stream[dst]]] = True
        lmask = launched[dst]
        keep &= ~(lmask & (proc[src] == proc[dst]))
        flag = ~lmask | cpu_src
    if keep.all():
        return src, dst, flag
    return src[keep], dst[keep], flag[keep]


def _roles(job: _Job, astra: bool, ablate: bool) -> tuple[np.ndarray, dict]:
    """Role of every node, and the runtime-sync arguments (slot, kind, stream, event)."""
    ntype = job.cat("type")
    role = np.full(len(ntype), PLAIN, np.int64)
    role[ntype == COLL] = COLLECTIVE
    role[ntype == SEND] = P2P_SEND
    role[ntype == RECV] = P2P_RECV
    sync_args: dict[int, tuple[int, int, int, int]] = {}
    if not astra and not ablate:
        kind = job.cat("sync_kind")
        idx = np.flatnonzero(kind > 0)
        if len(idx):
            role[idx] = _SYNC_ROLE[kind[idx]]
            slot = np.searchsorted(job.offsets, idx, side="right") - 1
            stream, event = job.cat("sync_stream")[idx], job.cat("sync_event")[idx]
            args = zip(
                slot.tolist(), kind[idx].tolist(), stream.tolist(), event.tolist(), strict=True
            )
            sync_args = dict(zip(idx.tolist(), args, strict=True))
    return role, sync_args


def build_plan(
    graphs: Sequence[RankGraph],
    assignments: Sequence[Assignment],
    astra: bool,
    ablate: bool,
) -> Plan:
    """The global plan (communication and sync roles are filled in by the caller)."""
    job = _job(graphs, assignments)
    n = int(job.offsets[-1])
    dur = np.concatenate([compute_durations(g, astra) for g in graphs]).astype(np.int64)
    is_cpu_thread = (job.pkind == _CPU) & (job.cat("tid") >= 0)
    gap = np.zeros(n, np.int64) if astra else np.where(is_cpu_thread, job.cat("gap_ns"), 0)
    role, sync_args = _roles(job, astra, ablate)
    in_gap = is_cpu_thread & ((role == COLLECTIVE) | (role == P2P_SEND) | (role == P2P_RECV))
    src, dst, flag = _edges(job, ablate, not astra)
    is_early = np.zeros(len(src), bool)
    lat = np.zeros(len(src), np.int64)
    if not astra:
        launch = flag & (job.pkind[src] == _CPU) & job.on_stream[dst] & (role[src] == PLAIN)
        start_ns, dur_ns = job.cat("start_ns"), job.cat("dur_ns")
        s0, d0 = start_ns[src], start_ns[dst]
        lat = d0 - s0
        is_early = launch & (s0 >= 0) & (d0 >= 0) & (lat < dur_ns[src])
        lat = np.maximum(lat, 0)
    role[src[is_early]] = LAUNCH
    early: dict[int, list[tuple[int, int]]] = {}
    early_src, early_dst = src[is_early].tolist(), dst[is_early].tolist()
    for e, (v, latency) in enumerate(zip(early_src, lat[is_early].tolist(), strict=True)):
        early.setdefault(v, []).append((e, latency))
    indeg = np.bincount(dst, minlength=n)
    enq = np.bincount(dst[flag], minlength=n)
    if early_src:
        src, dst, flag = src[~is_early], dst[~is_early], flag[~is_early]
    order = np.argsort(src, kind="stable")
    sole = flag & (indeg[dst] == 1)
    succ_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=succ_ptr[1:])
    processors = [(k, p) for k, a in enumerate(assignments) for p in a.processors]
    is_stream = [p.kind == ProcKind.GPU and p.key is not None for _, p in processors]
    stream_of: list[dict[int, int]] = [{} for _ in graphs]
    for j, (k, p) in enumerate(processors):
        if is_stream[j]:
            stream_of[k][p.key] = j  # type: ignore[index]
    proc_offsets = np.cumsum([0] + [len(a.processors) for a in assignments]).tolist()
    return Plan(
        offsets=job.offsets.tolist(),
        proc_offsets=proc_offsets,
        dur=dur,
        gap=gap,
        proc=job.proc,
        role=role,
        succ_ptr=succ_ptr,
        succ=dst[order] * 4 + sole[order] * 2 + flag[order],
        indeg=indeg,
        enq=enq,
        unlimited=[p.kind == ProcKind.META for _, p in processors],
        is_stream=is_stream,
        by_id=astra,
        match=np.full(n, -1, np.int64),
        wait_in_gap=in_gap,
        sync_args=sync_args,
        stream_of=stream_of,
        early=early,
        early_dst=early_dst,
    )
