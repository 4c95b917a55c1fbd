"""Flattening the simulated ranks into one global plan the scheduler runs: numpy arrays.

Node `i` of simulated slot `k` becomes global node `offsets[k] + i`; processors likewise.
Here each node gets its duration for the mode, its processor, its role (plain, collective,
send, receive, runtime sync), and its dependency counters; edges become successor lists
with a flag saying whether the edge *enqueues* the node. A GPU op launched by a CPU call
enters its stream's FIFO when that launch completes and then waits at the head for its
other dependencies (its same-stream predecessor is implied by the FIFO and dropped);
every other node enters its processor's queue when all its dependencies are done.
The plan is filled rank by rank into arrays allocated once for the whole job, in the
narrowest types that hold the values, so planning costs ~55 bytes per node plus one
rank's temporaries (`docs/speed.md`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from lumos.simulator.backlog import Hold
from lumos.simulator.blocking import early_latency, waits
from lumos.simulator.graph import COLL, RECV, SEND, RankGraph, SyncKind
from lumos.simulator.heap import trim
from lumos.simulator.processors import Assignment
from lumos.simulator.result import ProcKind

#: marks a held first op's `gap` (`Plan.held`): far below any dispatch delay
HELD = 1 << 60
PLAIN, COLLECTIVE, P2P_SEND, P2P_RECV, SYNC_WAIT, EVENT_RECORD, STREAM_WAIT, LAUNCH = range(8)
_KINDS = list(ProcKind)
_CPU, _GPU = _KINDS.index(ProcKind.CPU), _KINDS.index(ProcKind.GPU)
#: released graphs' nodes between two heap trims while a plan fills (~40 MB of columns)
TRIM_NODES = 250_000
_SYNC_ROLE = np.full(max(SyncKind) + 1, SYNC_WAIT, np.int64)
_SYNC_ROLE[SyncKind.EVENT_RECORD] = EVENT_RECORD
_SYNC_ROLE[SyncKind.STREAM_WAIT_EVENT] = STREAM_WAIT


@dataclass(slots=True)
class Plan:
    """Everything the scheduler needs, indexed by global node/processor.

    Per node (numpy arrays, length n): `dur` (int64, ns; communication is timed per
    instance instead), `gap` (int64: on a CPU thread the untraced time after the thread's
    previous end, on a GPU stream minus the dispatch delay after the node could start), `proc` (int32), `role` (int8), `indeg` / `enq`
    (int32 dependency counts: all, and those that enqueue the node), `wait_in_gap`
    (bool), `match` (int64 instance id, -1: none; filled with `inst_dur`/`inst_members`
    by the caller). `run_plan` uses a plan up: it counts `indeg`/`enq` down in place. Successors in CSR form:
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
    `early_wait[v]`: (edge id, time after, recorded duration) of a LAUNCH node v that
    returned, as recorded, only after its one early op ended (`lumos.simulator.blocking`):
    with runtime syncs it ends that long after its op's stream has run the op.

    `inst_exit[m]`: None when every member of instance m leaves at its last arrival +
    `inst_dur[m]`; else each member's own time after the last arrival, in the order of
    `inst_members[m]` (replay keeps the recorded exits; a pricer may give its own).
    `free_at`: (processor, time) of streams still busy at the step start with work
    queued before it (`lumos.simulator.backlog`); they take no node until then.
    `held[v]`: with relative holds instead, the latest start of a stream's first op v
    held past the moment it could start; its `gap` is `-(HELD + hold)`: it starts
    `hold` after it could, capped at `held[v]` (and never before it could).
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
    held: dict[int, int] = field(default_factory=dict)
    #: astra mode: per instance, arrival times -> per-member finish times (None: together)
    inst_finish: list[Callable[[Sequence[int]], list[int]] | None] = field(default_factory=list)
    sync_args: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    stream_of: list[dict[int, int]] = field(default_factory=list)
    slot_start: list[int] = field(default_factory=list)
    early: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    early_dst: list[int] = field(default_factory=list)
    early_wait: dict[int, tuple[int, int, int]] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.dur)

    def held_start(self, v: int, t: int) -> int:
        """When the held first op v (`held`), able to start at t, starts."""
        latest, s = self.held[v], t - HELD - int(self.gap[v])
        return t if t >= latest else s if s < latest else latest


def compute_durations(g: RankGraph, astra: bool) -> np.ndarray:
    """Per-node duration for compute/bookkeeping nodes in ns (comm is priced per instance)."""
    if astra:
        return np.where(g.dur_us_ns > 0, g.dur_us_ns, 1)
    return np.maximum(g.dur_ns, 0)


def _edges(
    g: RankGraph,
    pk: np.ndarray,
    proc: np.ndarray,
    on_stream: np.ndarray,
    ablate: bool,
    native: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rank's kept edges (src, dst, enqueue flag), local node indices, in dependency
    order; `pk`/`proc`: each node's processor kind and (rank-local) processor."""
    n = len(g)
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(g.dep_ptr))
    src = g.dep_idx.astype(np.int64)
    keep = np.ones(len(src), bool)
    if ablate:
        gpu_src = pk[src] == _GPU
        keep &= ~(gpu_src & ((pk[dst] == _CPU) | ((pk[dst] == _GPU) & (proc[src] != proc[dst]))))
    flag = np.ones(len(src), bool)
    if native:
        cpu_src = (pk[src] == _CPU) & keep
        launched = np.zeros(n, bool)
        launched[dst[cpu_src & on_stream[dst]]] = True
        lmask = launched[dst]
        keep &= ~(lmask & (proc[src] == proc[dst]))
        flag = ~lmask | cpu_src
    if keep.all():
        return src, dst, flag
    return src[keep], dst[keep], flag[keep]


def _runtime_waits(
    g: RankGraph,
    pk: np.ndarray,
    role: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    flag: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Drop the recorded GPU-op edges into device and stream syncs that the runtime sync
    (`lumos.simulator.sync`) waits for anyway: the sync then starts when it is called and
    counts what its streams hold at that moment, as CUDA does. Kept as an edge, it started
    once those ops had ended and counted work that another thread launched meanwhile (the
    autograd thread's kernels while the main thread blocks in `cudaDeviceSynchronize`).
    Edges from other streams (a CUDA graph's, for a stream sync) stay."""
    kind = g.sync_kind[dst]
    covered = (role[dst] == SYNC_WAIT) & (pk[src] == _GPU) & (g.stream[src] >= 0)
    covered &= (kind == SyncKind.DEVICE) | (
        (kind == SyncKind.STREAM) & (g.stream[src] == g.sync_stream[dst])
    )
    if not covered.any():
        return src, dst, flag
    return src[~covered], dst[~covered], flag[~covered]


def _roles(g: RankGraph, slot: int, base: int, astra: bool, ablate: bool, plan: Plan) -> np.ndarray:
    """Role of every node of the rank; adds its runtime syncs to `plan.sync_args` (global
    node → slot, kind, stream, event)."""
    role = np.full(len(g), PLAIN, np.int8)
    role[g.type == COLL] = COLLECTIVE
    role[g.type == SEND] = P2P_SEND
    role[g.type == RECV] = P2P_RECV
    if not astra and not ablate:
        idx = np.flatnonzero(g.sync_kind > 0)
        if len(idx):
            kind = g.sync_kind[idx]
            role[idx] = _SYNC_ROLE[kind]
            args = zip(
                kind.tolist(), g.sync_stream[idx].tolist(), g.sync_event[idx].tolist(), strict=True
            )
            for v, (k, stream, event) in zip((idx + base).tolist(), args, strict=True):
                plan.sync_args[v] = (slot, k, stream, event)
    return role


def empty_plan(graphs: Sequence[RankGraph], assignments: Sequence[Assignment], astra: bool) -> Plan:
    """A plan with its per-node arrays allocated (filled rank by rank) and its processors."""
    sizes = [len(g) for g in graphs]
    offsets = np.cumsum([0, *sizes]).tolist()
    n = offsets[-1]
    processors = [(k, p) for k, a in enumerate(assignments) for p in a.processors]
    is_stream = [p.kind == ProcKind.GPU and p.key is not None for _, p in processors]
    stream_of: list[dict[int, int]] = [{} for _ in graphs]
    for j, (k, p) in enumerate(processors):
        if is_stream[j]:
            stream_of[k][p.key] = j  # type: ignore[index]
    return Plan(
        offsets=offsets,
        proc_offsets=np.cumsum([0] + [len(a.processors) for a in assignments]).tolist(),
        dur=np.empty(n, np.int64),
        gap=np.zeros(n, np.int64),
        proc=np.empty(n, np.int32),
        role=np.empty(n, np.int8),
        succ_ptr=np.zeros(n + 1, np.int64),
        succ=np.zeros(0, np.int64),
        indeg=np.empty(n, np.int32),
        enq=np.empty(n, np.int32),
        unlimited=[p.kind == ProcKind.META for _, p in processors],
        is_stream=is_stream,
        by_id=astra,
        match=np.full(n, -1, np.int64),
        wait_in_gap=np.zeros(n, bool),
        stream_of=stream_of,
    )


def _add_rank(
    plan: Plan, k: int, g: RankGraph, a: Assignment, astra: bool, ablate: bool
) -> np.ndarray:
    """Fill slot k's rows of the plan from its graph; returns its successor entries."""
    lo, hi, p0 = plan.offsets[k], plan.offsets[k + 1], plan.proc_offsets[k]
    kinds = np.asarray([_KINDS.index(p.kind) for p in a.processors], np.int8)
    proc = a.proc
    pk = kinds[proc]
    on_stream = a.on_stream if a.on_stream is not None else g.stream >= 0
    plan.dur[lo:hi] = compute_durations(g, astra)
    plan.proc[lo:hi] = proc
    plan.proc[lo:hi] += p0
    is_cpu_thread = (pk == _CPU) & (g.tid >= 0)
    if not astra:  # untraced time on threads; dispatch delays on streams, negated
        plan.gap[lo:hi] = np.where(
            is_cpu_thread, g.gap_ns, np.where((pk == _GPU) & on_stream, -g.gap_ns, 0)
        )
    role = _roles(g, k, lo, astra, ablate, plan)
    comm = (role == COLLECTIVE) | (role == P2P_SEND) | (role == P2P_RECV)
    plan.wait_in_gap[lo:hi] = is_cpu_thread & comm
    src, dst, flag = _edges(g, pk, proc, on_stream, ablate, not astra)
    if plan.sync_args:
        src, dst, flag = _runtime_waits(g, pk, role, src, dst, flag)
    is_early = np.zeros(len(src), bool)
    lat = np.zeros(len(src), np.int64)
    if not astra:
        launch = flag & (pk[src] == _CPU) & on_stream[dst] & (role[src] == PLAIN)
        s0, d0 = g.start_ns[src], g.start_ns[dst]
        is_early = launch & (s0 >= 0) & (d0 >= 0) & (d0 - s0 < g.dur_ns[src])
        lat[is_early] = early_latency(g, src[is_early], dst[is_early])
    role[src[is_early]] = LAUNCH
    plan.role[lo:hi] = role
    first = len(plan.early_dst)
    plan.early_dst += (dst[is_early] + lo).tolist()
    early_src = (src[is_early] + lo).tolist()
    for e, (v, latency) in enumerate(zip(early_src, lat[is_early].tolist(), strict=True)):
        plan.early.setdefault(v, []).append((first + e, latency))
    if early_src and not ablate:  # the ablation drops GPU->CPU waits
        for e, after in waits(g, src[is_early], dst[is_early]).items():
            v = early_src[e]
            plan.early_wait[v] = (first + e, after, int(plan.dur[v]))
    n = hi - lo
    indeg = np.bincount(dst, minlength=n)
    plan.indeg[lo:hi] = indeg
    plan.enq[lo:hi] = np.bincount(dst[flag], minlength=n)
    if early_src:
        src, dst, flag = src[~is_early], dst[~is_early], flag[~is_early]
    # a launch's GPU ops first: they are on their stream when a sync it precedes counts
    order = np.lexsort((~on_stream[dst], src))
    sole = flag & (indeg[dst] == 1)
    base = int(plan.succ_ptr[lo])
    plan.succ_ptr[lo + 1 : hi + 1] = np.cumsum(np.bincount(src, minlength=n)) + base
    return (dst[order] + lo) * 4 + sole[order] * 2 + flag[order]


def build_plan(
    plan: Plan,
    graphs: list[RankGraph],
    assignments: list[Assignment],
    astra: bool,
    ablate: bool,
    release: bool = False,
) -> None:
    """Fill an `empty_plan` from the graphs (communication and sync roles are filled in
    by the caller). With `release`, each graph and assignment leaves its list once its
    rows are in (both lists end empty): a caller holding no other reference gets their
    memory back while the plan fills, rank by rank."""
    parts = []
    released = 0
    pending = list(zip(graphs, assignments, strict=True))
    if release:
        graphs.clear()
        assignments.clear()
    pending.reverse()
    for k in range(len(pending)):
        g, a = pending.pop()
        parts.append(_add_rank(plan, k, g, a, astra, ablate))
        released += len(g)
        del g, a
        if release and released >= TRIM_NODES:  # freed columns stay resident until trimmed
            trim()
            released = 0
    plan.succ = np.concatenate(parts) if parts else np.zeros(0, np.int64)


def hold_first_ops(plan: Plan, k: int, held: Sequence[Hold], relative: bool) -> None:
    """Hold slot k's first ops of busy streams (after `build_plan`): `relative`, each
    op its hold after it can start (`Plan.held`); else each stream busy until its op's
    recorded start (`Plan.free_at`), the op without a gap of its own."""
    lo, p0 = plan.offsets[k], plan.proc_offsets[k]
    t0 = plan.slot_start[k] if plan.slot_start else 0
    for h in held:
        if relative:
            plan.gap[lo + h.node] = -(HELD + h.hold_ns)
            plan.held[lo + h.node] = t0 + h.start_ns
        else:
            plan.gap[lo + h.node] = 0
            plan.free_at.append((p0 + h.proc, t0 + h.start_ns))
