"""Building an execution graph from a host ET alone (no Kineto): shapes but no times.

Each thread's leaf ops (in `rf_id` order, i.e. start order) become a chain of CPU tasks
marked `dur_estimated`, so the simulator's cost model prices them. `nccl:*` ops become
COMM tasks on the rank's comm processor, fed by the op before them on the thread;
`gloo:*` ops stay on their thread. The step is the last `ProfilerStep#N` subtree's
`rf_id` range when there is one, else the whole trace.
"""

from __future__ import annotations

from collections import defaultdict

from lumos.converters import conventions as cv
from lumos.converters.comm import RECV, SEND, kind_of
from lumos.converters.host_et import HostOp, HostTrace
from lumos.converters.host_et_schema import PROCESS_GROUP_INIT, ROOT_NAMES
from lumos.converters.steps import STEP_PREFIX
from lumos.converters.tasks import Task, TaskKind


def step_ops(host: HostTrace) -> tuple[list[HostOp], str]:
    """The ops of the last ProfilerStep (by rf_id range), or all ops."""
    steps = sorted(
        (op for op in host.ops if op.name.startswith(STEP_PREFIX)), key=lambda o: o.rf_id
    )
    if not steps:
        return list(host.ops), "whole trace"
    last = steps[-1]
    return [op for op in host.ops if op.rf_id >= last.rf_id], last.name


def build_host_tasks(
    host: HostTrace, rank: int, world_size: int, groups: dict[str, tuple[int, ...]]
) -> tuple[list[Task], str]:
    ops, step_name = step_ops(host)
    by_id = host.by_id()
    included = {op.id for op in ops}
    has_child = {op.parent for op in ops if op.parent in included}
    threads: dict[int, list[HostOp]] = defaultdict(list)
    for op in ops:
        if op.name in ROOT_NAMES or op.name == PROCESS_GROUP_INIT:
            continue
        comm = op.name.startswith(("nccl:", "gloo:"))
        if op.name.startswith(STEP_PREFIX) or (op.id in has_child and not comm):
            continue
        threads[op.tid].append(op)
    tasks: list[Task] = []
    seq: dict[str, int] = {}
    for tid in sorted(threads):
        prev: Task | None = None
        for op in sorted(threads[tid], key=lambda o: (o.rf_id, o.id)):
            nccl = op.name.startswith("nccl:")
            task = Task(TaskKind.CPU, op.name, 0, 0, tid=-1 if nccl else tid, host=op)
            if nccl or op.name.startswith("gloo:"):
                _comm(task, op, by_id.get(op.parent), rank, world_size, groups, seq)
            if prev is not None:
                (task.data if nccl else task.ctrl).append(prev)
            if not nccl:
                prev = task
            tasks.append(task)
    return tasks, step_name


def _comm(
    task: Task,
    op: HostOp,
    parent: HostOp | None,
    rank: int,
    world_size: int,
    groups: dict[str, tuple[int, ...]],
    seq: dict[str, int],
) -> None:
    args = parent.comm if parent is not None else None
    kind = kind_of(args.collective) if args is not None else None
    kind = kind if kind is not None else kind_of(op.name)
    pg = (args.pg_name if args else "") or "0"
    ranks = groups.get(pg) or (args.pg_ranks if args else ()) or tuple(range(world_size))
    size = args.in_nelems * args.elem_bytes if args else 0
    task.attrs["comm_size"] = size
    task.attrs["pg_name"] = pg
    if kind in (SEND, RECV):
        task.kind = TaskKind.SEND if kind == SEND else TaskKind.RECV
        task.attrs["comm_src"], task.attrs["comm_dst"], task.attrs["comm_tag"] = rank, rank, 0
        return
    task.kind = TaskKind.COLL
    task.attrs["comm_type"] = int(kind) if isinstance(kind, int) else 0
    task.attrs[cv.PG_RANKS] = list(ranks)
    task.attrs[cv.COMM_SEQ] = seq.get(pg, 0)
    seq[pg] = seq.get(pg, 0) + 1
