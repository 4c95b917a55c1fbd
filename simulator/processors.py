"""Which in-order processor runs each node of a rank: CPU threads, GPU streams, catch-alls.

Native modes follow the ET contract: a node with `stream` runs on that GPU stream; one
with `tid` (and no stream) on that CPU thread; a node with neither goes to the rank's
single "cpu" (`is_cpu_op`), "gpu" (compute) or "comm" (communication) processor, and
METADATA/INVALID nodes to an unlimited "meta" processor. Foreign ETs that follow
mlc-chakra's convention — GPU ops carry `tid` = their stream, `is_cpu_op` false, and no
`stream` — are recognised by non-CPU compute nodes whose `tid` is none of the rank's
CPU threads (the tids of its `is_cpu_op` nodes): then every non-CPU node with such a
`tid` runs on GPU stream `tid`. ASTRA-sim mode reproduces its
per-rank resource rule instead: one CPU op, one GPU compute node and one communication op
at a time, whatever the stream, with receives unlimited.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lumos.simulator.distinct import distinct
from lumos.simulator.graph import COLL, COMM_TYPES, COMP, INVALID, METADATA, SEND, RankGraph
from lumos.simulator.result import ProcessorInfo, ProcKind


@dataclass(frozen=True, slots=True)
class Assignment:
    """Processor of every node (`proc`, int32 index into `processors`)."""

    proc: np.ndarray
    processors: list[ProcessorInfo]
    on_stream: np.ndarray | None = None  # bool per node: runs on a GPU stream (native)

    def kinds(self) -> np.ndarray:
        """ProcKind of every processor as small ints (0 cpu, 1 gpu, 2 comm, 3 meta)."""
        order = list(ProcKind)
        return np.asarray([order.index(p.kind) for p in self.processors], np.int8)


def assign_processors(g: RankGraph, astra: bool = False) -> Assignment:
    """Map each node of `g` to a processor; deterministic order: threads, streams, others."""
    return _assign_astra(g) if astra else _assign_native(g)


def stream_ids(g: RankGraph) -> np.ndarray:
    """The GPU stream of every node (-1: none): `stream`, or for ETs in mlc-chakra's
    convention, the `tid` of non-CPU nodes that is not one of the rank's CPU threads."""
    cpu_threads = distinct(g.tid[g.is_cpu_op & (g.tid >= 0)])
    by_tid = ~g.is_cpu_op & (g.stream < 0) & (g.tid >= 0) & ~np.isin(g.tid, cpu_threads)
    by_tid &= ~np.isin(g.type, (METADATA, INVALID))
    if not cpu_threads.size or not (by_tid & (g.type == COMP)).any():
        return g.stream
    return np.where(by_tid, g.tid, g.stream)


def _assign_native(g: RankGraph) -> Assignment:
    n = len(g)
    proc = np.full(n, -1, np.int32)
    procs: list[ProcessorInfo] = []
    stream = stream_ids(g)
    on_stream = stream >= 0
    on_thread = (~on_stream) & (g.tid >= 0)
    for tid in distinct(g.tid[on_thread]).tolist():
        proc[on_thread & (g.tid == tid)] = len(procs)
        procs.append(ProcessorInfo(f"thread {tid}", ProcKind.CPU, int(tid)))
    for sid in distinct(stream[on_stream]).tolist():
        proc[on_stream & (stream == sid)] = len(procs)
        procs.append(ProcessorInfo(f"stream {sid}", ProcKind.GPU, int(sid)))
    rest = proc < 0
    is_comm = np.isin(g.type, COMM_TYPES)
    is_meta = np.isin(g.type, (METADATA, INVALID))
    buckets = (
        ("cpu", ProcKind.CPU, rest & g.is_cpu_op & ~is_comm & ~is_meta),
        ("gpu", ProcKind.GPU, rest & ~g.is_cpu_op & ~is_comm & ~is_meta),
        ("comm", ProcKind.COMM, rest & is_comm),
        ("meta", ProcKind.META, rest & is_meta),
    )
    for name, kind, mask in buckets:
        if mask.any():
            proc[mask] = len(procs)
            procs.append(ProcessorInfo(name, kind))
    return Assignment(proc, procs, on_stream)


def _assign_astra(g: RankGraph) -> Assignment:
    n = len(g)
    proc = np.full(n, -1, np.int32)
    procs: list[ProcessorInfo] = []
    is_comm = np.isin(g.type, (SEND, COLL))
    buckets = (
        ("cpu", ProcKind.CPU, g.is_cpu_op & ~np.isin(g.type, COMM_TYPES)),
        ("gpu", ProcKind.GPU, (g.type == COMP) & ~g.is_cpu_op),
        ("comm", ProcKind.COMM, is_comm),
    )
    for name, kind, mask in buckets:
        mask = mask & (proc < 0)
        if mask.any():
            proc[mask] = len(procs)
            procs.append(ProcessorInfo(name, kind))
    rest = proc < 0
    if rest.any():
        proc[rest] = len(procs)
        procs.append(ProcessorInfo("meta", ProcKind.META))
    return Assignment(proc, procs)
