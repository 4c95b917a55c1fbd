"""Flattening the simulated ranks into one global plan the scheduler runs: plain lists.

Node `i` of simulated slot `k` becomes global node `offsets[k] + i`; processors likewise.
Here each node gets its duration for the mode, its processor, its role (plain, collective,
send, receive, runtime sync), and its dependency counters; edges become successor lists
with a flag saying whether the edge *enqueues* the node. A GPU op launched by a CPU call
enters its stream's FIFO when that launch completes and then waits at the head for its
other dependencies (its same-stream predecessor is implied by the FIFO and dropped);
every other node enters its processor's queue when all its dependencies are done.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from lumos.simulator.graph import COLL, RECV, SEND, RankGraph, SyncKind
from lumos.simulator.processors import Assignment
from lumos.simulator.result import ProcKind

PLAIN, COLLECTIVE, P2P_SEND, P2P_RECV, SYNC_WAIT, EVENT_RECORD, STREAM_WAIT, LAUNCH = range(8)
_CPU, _GPU = list(ProcKind).index(ProcKind.CPU), list(ProcKind).index(ProcKind.GPU)


@dataclass(slots=True)
class Plan:
    """Everything the scheduler needs, as Python lists indexed by global node/processor.

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
    """

    offsets: list[int]
    proc_offsets: list[int]
    dur: list[int]
    gap: list[int]
    proc: list[int]
    role: list[int]
    succ_ptr: list[int]
    succ: list[int]
    indeg: list[int]
    enq: list[int]
    unlimited: list[bool]
    is_stream: list[bool]
    by_id: bool
    match: list[int] = field(default_factory=list)
    inst_dur: list[int] = field(default_factory=list)
    inst_members: list[list[int]] = field(default_factory=list)
    sync_args: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    stream_of: list[dict[int, int]] = field(default_factory=list)
    slot_start: list[int] = field(default_factory=list)
    wait_in_gap: list[bool] = field(default_factory=list)
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


def _edges(
    g: RankGraph, a: Assignment, kinds: np.ndarray, native: bool, ablate: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kept edges (src, dst, enqueue flag) of one rank."""
    n = len(g)
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(g.dep_ptr))
    src = g.dep_idx.astype(np.int64)
    pk = kinds[a.proc]
    keep = np.ones(len(src), bool)
    if ablate:
        gpu_src = pk[src] == _GPU
        keep &= ~(
            gpu_src & ((pk[dst] == _CPU) | ((pk[dst] == _GPU) & (a.proc[src] != a.proc[dst])))
        )
    flag = np.ones(len(src), bool)
    if native:
        on_stream = a.on_stream if a.on_stream is not None else g.stream >= 0
        cpu_src = (pk[src] == _CPU) & keep
        launched = np.zeros(n, bool)
        launched[dst[cpu_src & on_stream[dst]]] = True
        lmask = launched[dst]
        keep &= ~(lmask & (a.proc[src] == a.proc[dst]))
        flag = ~lmask | cpu_src
    return src[keep], dst[keep], flag[keep]


def _early(
    g: RankGraph, src: np.ndarray, dst: np.ndarray, launch: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Of the `launch` edges (CPU call → GPU op), those whose op started before the call
    ended, as recorded: mask, and latency (recorded op start - call start, at least 0)."""
    s0, d0 = g.start_ns[src], g.start_ns[dst]
    lat = d0 - s0
    mask = launch & (s0 >= 0) & (d0 >= 0) & (lat < g.dur_ns[src])
    return mask, np.maximum(lat, 0)


def build_plan(
    graphs: Sequence[RankGraph],
    assignments: Sequence[Assignment],
    astra: bool,
    ablate: bool,
) -> Plan:
    """The global plan (communication and sync roles are filled in by the caller)."""
    offsets, proc_offsets = [0], [0]
    durs, gaps, procs, roles, unlimited, is_stream = [], [], [], [], [], []
    in_gap = []
    srcs, dsts, flags, early_masks, early_lats = [], [], [], [], []
    stream_of: list[dict[int, int]] = []
    sync_args: dict[int, tuple[int, int, int, int]] = {}
    for k, (g, a) in enumerate(zip(graphs, assignments, strict=True)):
        off, poff = offsets[-1], proc_offsets[-1]
        kinds = a.kinds()
        durs.append(compute_durations(g, astra))
        is_cpu_thread = (kinds[a.proc] == _CPU) & (g.tid >= 0)
        gaps.append(np.zeros(len(g), np.int64) if astra else np.where(is_cpu_thread, g.gap_ns, 0))
        procs.append(a.proc.astype(np.int64) + poff)
        role = np.full(len(g), PLAIN, np.int64)
        role[g.type == COLL] = COLLECTIVE
        role[g.type == SEND] = P2P_SEND
        role[g.type == RECV] = P2P_RECV
        if not astra and not ablate:
            for i in np.nonzero(g.sync_kind > 0)[0].tolist():
                kind = int(g.sync_kind[i])
                role[i] = (
                    EVENT_RECORD
                    if kind == SyncKind.EVENT_RECORD
                    else STREAM_WAIT
                    if kind == SyncKind.STREAM_WAIT_EVENT
                    else SYNC_WAIT
                )
                sync_args[off + i] = (k, kind, int(g.sync_stream[i]), int(g.sync_event[i]))
        in_gap.append(is_cpu_thread & np.isin(role, (COLLECTIVE, P2P_SEND, P2P_RECV)))
        s, d, f = _edges(g, a, kinds, not astra, ablate)
        on_stream = a.on_stream if a.on_stream is not None else g.stream >= 0
        launch = f & (kinds[a.proc[s]] == _CPU) & on_stream[d] & (role[s] == PLAIN)
        is_early, lat = _early(g, s, d, launch) if not astra else (launch & False, s)
        role[s[is_early]] = LAUNCH
        roles.append(role)
        early_masks.append(is_early)
        early_lats.append(lat)
        srcs.append(s + off)
        dsts.append(d + off)
        flags.append(f)
        unlimited += [p.kind == ProcKind.META for p in a.processors]
        is_stream += [p.kind == ProcKind.GPU and p.key is not None for p in a.processors]
        stream_of.append(
            {
                p.key: poff + j
                for j, p in enumerate(a.processors)
                if is_stream[poff + j] and p.key is not None
            }
        )
        offsets.append(off + len(g))
        proc_offsets.append(poff + len(a.processors))
    n = offsets[-1]
    src, dst, flag = np.concatenate(srcs), np.concatenate(dsts), np.concatenate(flags)
    indeg = np.bincount(dst, minlength=n).tolist()
    enq = np.bincount(dst[flag], minlength=n).tolist()
    is_early = np.concatenate(early_masks)
    early: dict[int, list[tuple[int, int]]] = {}
    early_src, early_dst = src[is_early].tolist(), dst[is_early].tolist()
    latencies = np.concatenate(early_lats)[is_early].tolist()
    for e, (v, latency) in enumerate(zip(early_src, latencies, strict=True)):
        early.setdefault(v, []).append((e, latency))
    src, dst, flag = src[~is_early], dst[~is_early], flag[~is_early]
    order = np.argsort(src, kind="stable")
    succ = (dst[order] * 2 + flag[order]).tolist()
    succ_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=succ_ptr[1:])
    return Plan(
        offsets=offsets,
        proc_offsets=proc_offsets,
        dur=np.concatenate(durs).tolist(),
        gap=np.concatenate(gaps).tolist(),
        proc=np.concatenate(procs).tolist(),
        role=np.concatenate(roles).tolist(),
        succ_ptr=succ_ptr.tolist(),
        succ=succ,
        indeg=indeg,
        enq=enq,
        unlimited=unlimited,
        is_stream=is_stream,
        by_id=astra,
        match=[-1] * n,
        sync_args=sync_args,
        stream_of=stream_of,
        wait_in_gap=np.concatenate(in_gap).tolist(),
        early=early,
        early_dst=early_dst,
    )
