"""Batched point-to-point transfers: many sends and receives, one NCCL kernel.

`batch_isend_irecv` (Megatron's pipeline P2P, `torch.distributed.pipelining`) runs its
ops inside a coalescing manager: each `c10d::send` / `c10d::recv_` only registers its
transfer — its `Concrete Inputs` end with the peer's group rank and the tag, its
`record_param_comms` names size and process group — and launches nothing; the group's
end launches one `ncclDevKernel_SendRecv` for all of them, inside a `nccl:coalesced`
range, with no NCCL metadata of its own (pytorch/pytorch#194693, mlcommons/chakra#178).
A SendRecv kernel whose type nothing names stands for the P2P ops its thread issued
after its previous NCCL launch: it becomes one SEND or RECV task per op, sends first,
on its stream, launched by its call, each with the kernel's recorded times; they pair
across ranks by (src, dst, tag) like unbatched ones. As one collective over the whole
group (the old reading) a pipeline of more than two stages could not be simulated:
its stages issue different numbers of them. The op after the batch on its stream, and
whatever waited for the kernel, wait for the batch's last task. A coalesced collective
kernel (Megatron's bucketed all-gathers in one `_coalescing_manager`) has a type by its
name but no size: it moves what its thread's collectives of that type, issued since its
previous NCCL launch, registered (`BatchFinder.coalesced_bytes`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np

from lumos.converters.pytorch.comm import (
    P2P_OPS,
    RECV,
    SEND,
    dims_bytes,
    dtype_bytes,
    group_ranks,
    kind_of,
    param_comms_peer,
)
from lumos.converters.pytorch.kineto import Kind, KinetoTrace
from lumos.converters.pytorch.tasks import TaskTable

PARAM_COMMS = "record_param_comms"


@dataclass(frozen=True, slots=True)
class P2POp:
    """One transfer of a batch: SEND or RECV, the peer's group rank, tag, bytes, group."""

    kind: str
    peer: int
    tag: int
    size: int
    pg_name: str
    pg_ranks: tuple[int, ...]


def is_batch_kernel(name: str) -> bool:
    """NCCL's grouped point-to-point kernel (`ncclDevKernel_SendRecv`, `ncclKernel_SendRecv_*`)."""
    return "SendRecv" in name


class BatchFinder:
    """The P2P ops (and collectives) each thread issued between two of its NCCL launches."""

    def __init__(self, trace: KinetoTrace, launch_rows: list[int]) -> None:
        self.trace = trace
        cpu = np.flatnonzero(trace.kind == Kind.CPU_OP)
        names = trace.name[cpu]
        wanted = {i for i, n in enumerate(trace.names) if n in P2P_OPS}
        comms = {i for i, n in enumerate(trace.names) if n == PARAM_COMMS}
        self.ops = _by_thread(trace, cpu[np.isin(names, list(wanted))])
        self.comms = _by_thread(trace, cpu[np.isin(names, list(comms))])
        self.launches = _by_thread(trace, np.asarray(sorted(set(launch_rows)), np.int64))

    def ops_before(
        self, launch_row: int, groups: dict[str, tuple[int, ...]], world: int
    ) -> list[P2POp] | None:
        """The batch launched by `launch_row`: its thread's P2P ops after the thread's
        previous NCCL launch, sends first; None when there are none, or one lacks its peer."""
        key, rows = self._window(self.ops, launch_row)
        out = [self._op(row, key, groups, world) for row in rows]
        if not out or any(op is None for op in out):
            return None
        ops = [op for op in out if op is not None]
        return [op for op in ops if op.kind == SEND] + [op for op in ops if op.kind == RECV]

    def coalesced_bytes(self, launch_row: int, kind: int | str) -> int:
        """Bytes of the `kind` collectives (their `record_param_comms`) the thread issued
        after its previous NCCL launch and before `launch_row`: what one kernel of a
        coalescing manager (Megatron's bucketed all-gathers) moves, which its own
        arguments do not say."""
        total = 0
        for row in self._window(self.comms, launch_row)[1]:
            args = self.trace.args.get(row) or {}
            name = args.get("Collective name")
            if isinstance(name, str) and kind_of(name) == kind and "In msg nelems" in args:
                total += int(args["In msg nelems"]) * dtype_bytes(str(args.get("dtype", "float")))
        return total

    def _window(
        self, events: dict[tuple[int, int], tuple[list, list]], launch_row: int
    ) -> tuple[tuple[int, int], list[int]]:
        """The launch's thread and `events`' rows on it that started after the thread's
        previous NCCL launch and before this one."""
        trace = self.trace
        key = (int(trace.pid[launch_row]), int(trace.tid[launch_row]))
        at = int(trace.ts[launch_row])
        times, _ = self.launches.get(key, ([], []))
        k = bisect.bisect_left(times, at) - 1
        since = times[k] if k >= 0 else -(1 << 62)
        ev_times, ev_rows = events.get(key, ([], []))
        lo, hi = bisect.bisect_right(ev_times, since), bisect.bisect_left(ev_times, at)
        return key, ev_rows[lo:hi]

    def _op(
        self, row: int, key: tuple[int, int], groups: dict[str, tuple[int, ...]], world: int
    ) -> P2POp | None:
        trace = self.trace
        args = trace.args.get(row) or {}
        concrete = args.get("Concrete Inputs") or []
        ints = [int(c) for c in concrete if isinstance(c, str) and c.lstrip("-").isdigit()]
        comm = self._param_comms(row, key)
        pg = str(comm.get("Process Group Name", "")) or "0"
        ranks = groups.get(pg) or group_ranks(comm) or tuple(range(world))
        if len(ints) < 2:  # no `Concrete Inputs` (record_shapes off): NCCL's own record
            ints = [param_comms_peer(comm, ranks), 0]
            if ints[0] < 0:
                return None
        size = dims_bytes(args)
        if "In msg nelems" in comm:
            size = int(comm["In msg nelems"]) * dtype_bytes(str(comm.get("dtype", "float")))
        kind = kind_of(trace.name_of(row))
        return P2POp(str(kind), ints[-2], ints[-1], size, pg, ranks)

    def _param_comms(self, row: int, key: tuple[int, int]) -> dict[str, Any]:
        """The arguments of the `record_param_comms` nested in the op (empty: none)."""
        trace = self.trace
        times, rows = self.comms.get(key, ([], []))
        start, end = int(trace.ts[row]), int(trace.ts[row] + trace.dur[row])
        k = bisect.bisect_left(times, start)
        if k < len(times) and times[k] <= end:
            return trace.args.get(rows[k]) or {}
        return {}


def split_task(table: TaskTable, task: int, count: int) -> list[int]:
    """Turn GPU task `task` into `count` tasks in a row on its stream, `task` first: each
    a copy of it (times, launch, stream), chained by control dependencies; the op after
    it on the stream, and every task that depended on it, depend on the last one."""
    if count < 2:
        return [task]
    base = len(table)
    copies = table.append(
        kind=np.repeat(table.kind[task], count - 1),
        name=np.repeat(table.name[task], count - 1),
        start=np.repeat(table.start[task], count - 1),
        dur=np.repeat(table.dur[task], count - 1),
        stream=np.repeat(table.stream[task], count - 1),
        device=np.repeat(table.device[task], count - 1),
        ev=np.repeat(table.ev[task], count - 1),
        host=np.repeat(table.host[task], count - 1),
        data1=np.repeat(table.data1[task], count - 1),
        ctrl=np.r_[task, np.arange(base, base + count - 2)],
    )
    last = int(copies[-1])
    after = np.flatnonzero(table.ctrl[:base] == task)
    table.ctrl[after] = last
    for deps in table.extra.values():
        for i, dep in enumerate(deps):
            if dep == task:
                deps[i] = last
    return [task, *copies.tolist()]


def _by_thread(trace: KinetoTrace, rows: np.ndarray) -> dict[tuple[int, int], tuple[list, list]]:
    """(pid, tid) → (start times, rows), sorted by start."""
    out: dict[tuple[int, int], tuple[list, list]] = {}
    if not len(rows):
        return out
    rows = rows[np.lexsort((rows, trace.ts[rows], trace.tid[rows], trace.pid[rows]))]
    for row, pid, tid, ts in zip(
        rows.tolist(),
        trace.pid[rows].tolist(),
        trace.tid[rows].tolist(),
        trace.ts[rows].tolist(),
        strict=True,
    ):
        times, kept = out.setdefault((pid, tid), ([], []))
        times.append(ts)
        kept.append(row)
    return out
