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

PLAIN, COLLECTIVE, P2P_SEND, P2P_RECV, SYNC_WAIT, EVENT_RECORD, STREAM_WAIT = range(7)
_CPU, _GPU = list(ProcKind).index(ProcKind.CPU), list(ProcKind).index(ProcKind.GPU)


@dataclass(slots=True)
class Plan:
    """Everything the scheduler needs, as Python lists indexed by global node/processor."""

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
        on_stream = g.stream >= 0
        cpu_src = (pk[src] == _CPU) & keep
        launched = np.zeros(n, bool)
        launched[dst[cpu_src & on_stream[dst]]] = True
        lmask = launched[dst]
        keep &= ~(lmask & (a.proc[src] == a.proc[dst]))
        flag = ~lmask | cpu_src
    return src[keep], dst[keep], flag[keep]


def build_plan(
    graphs: Sequence[RankGraph],
    assignments: Sequence[Assignment],
    astra: bool,
    ablate: bool,
) -> Plan:
    """The global plan (communication and sync roles are filled in by the caller)."""
    offsets, proc_offsets = [0], [0]
    durs, gaps, procs, roles, unlimited, is_stream = [], [], [], [], [], []
    srcs, dsts, flags = [], [], []
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
        roles.append(role)
        s, d, f = _edges(g, a, kinds, not astra, ablate)
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
        indeg=np.bincount(dst, minlength=n).tolist(),
        enq=np.bincount(dst[flag], minlength=n).tolist(),
        unlimited=unlimited,
        is_stream=is_stream,
        by_id=astra,
        match=[-1] * n,
        sync_args=sync_args,
        stream_of=stream_of,
    )
