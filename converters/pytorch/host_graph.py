"""Building an execution graph from a host ET alone (no Kineto): shapes but no times.

Each thread's tasks (`host_ops.select_tasks`: the innermost op of each call tree that
launches kernels, with its allocations and views folded in; other leaves; comm ops), in
`rf_id` order, i.e. start order, become a chain of CPU tasks marked `dur_estimated`, so the simulator's cost model prices them. `nccl:*` ops become
COMM tasks on the rank's comm processor, fed by the op before them on the thread;
`gloo:*` ops stay on their thread. A send/recv takes its peer and tag from the enclosing
`c10d::send` / `c10d::recv_` op (its last two Int inputs: group rank, tag), so host-only
pairs match across ranks; a comm op without `record_param_comms` takes its size from its
own first tensor. The step is the `rf_id` range of the last `ProfilerStep#N` that holds
ops, else the whole trace. Which ops become tasks: `host_ops`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from lumos.converters.chakra import conventions as cv
from lumos.converters.pytorch.comm import RECV, SEND, kind_of
from lumos.converters.pytorch.comm_tasks import P2P_OPS, CommContext
from lumos.converters.pytorch.host_et import CommArgs, HostTrace, tensor_nelems
from lumos.converters.pytorch.host_et_schema import PROCESS_GROUP_INIT, ROOT_NAMES
from lumos.converters.pytorch.host_ops import select_tasks
from lumos.converters.pytorch.steps import STEP_PREFIX
from lumos.converters.pytorch.tasks import TaskKind, TaskTable


def step_rows(host: HostTrace) -> tuple[np.ndarray, str]:
    """Rows of the last ProfilerStep that holds ops (its `rf_id` range, up to the next
    step), or all rows. A step the trace stopped in before its first op is skipped."""
    is_step = np.array([n.startswith(STEP_PREFIX) for n in host.names] or [False], bool)
    steps = np.flatnonzero(is_step[host.name])
    if not len(steps):
        return np.arange(len(host)), "whole trace"
    steps = steps[np.argsort(host.rf_id[steps], kind="stable")]
    ends = [*host.rf_id[steps[1:]].tolist(), np.iinfo(np.int64).max]
    for step, end in reversed(list(zip(steps.tolist(), ends, strict=True))):
        inside = (host.rf_id >= host.rf_id[step]) & (host.rf_id < end)
        if np.count_nonzero(inside) > 1:
            return np.flatnonzero(inside), host.name_of(step)
    return np.arange(len(host)), "whole trace"


def build_host_tasks(host: HostTrace, ctx: CommContext) -> tuple[TaskTable, str]:
    rows, step_name = step_rows(host)
    names = host.names
    flags = {
        key: np.array([test(n) for n in names] or [False], bool)
        for key, test in (
            ("skip", lambda n: n in ROOT_NAMES or n == PROCESS_GROUP_INIT),
            ("step", lambda n: n.startswith(STEP_PREFIX)),
            ("nccl", lambda n: n.startswith("nccl:")),
            ("gloo", lambda n: n.startswith("gloo:")),
        )
    }
    chosen = select_tasks(host, rows, flags["skip"] | flags["step"])
    rows = chosen.rows
    host_ops = chosen.host_ops.tolist()
    row_of_id = host.row_of_id()
    cols: dict[str, list[int]] = {k: [] for k in ("kind", "name", "tid", "host", "ctrl", "data1")}
    table = TaskTable(names)
    seq: dict[str, int] = {}
    attrs: dict[int, dict[str, Any]] = {}
    prev, prev_tid = -1, None
    for row in rows.tolist():
        tid = int(host.tid[row])
        if tid != prev_tid:
            prev, prev_tid = -1, tid
        nccl = bool(flags["nccl"][host.name[row]])
        task = len(cols["kind"])
        kind = TaskKind.CPU
        if nccl or flags["gloo"][host.name[row]]:
            parent = row_of_id.get(int(host.parent[row]))
            args = host.comm.get(parent) if parent is not None else None
            p2p = _P2pInfo.of(host, row, row_of_id)
            kind, attrs[task] = _comm(host.name_of(row), args, p2p, ctx, seq)
        elif host_ops[task] > 1:
            attrs[task] = {cv.HOST_OPS: host_ops[task]}
        cols["kind"].append(kind)
        cols["name"].append(int(host.name[row]))
        cols["tid"].append(-1 if nccl else tid)
        cols["host"].append(row)
        cols["ctrl"].append(-1 if nccl else prev)
        cols["data1"].append(prev if nccl else -1)
        if not nccl:
            prev = task
    table.append(**cols)
    table.attrs = attrs
    return table, step_name


@dataclass(frozen=True, slots=True)
class _P2pInfo:
    """What the ops around a host-only comm op say: peer (group rank), tag, bytes."""

    peer: int
    tag: int
    size: int

    @staticmethod
    def of(host: HostTrace, row: int, row_of_id: dict[int, int]) -> _P2pInfo:
        """Peer and tag from the enclosing c10d::send / recv_ op's Int inputs (…, peer,
        tag); size from the op's own first tensor."""
        size = _input_bytes(host, row)
        at: int | None = row
        for _ in range(4):
            if at is None:
                break
            if host.name_of(at) in P2P_OPS:
                inputs = host.io_of(at)[0]
                if inputs is not None:
                    values, types = orjson.loads(inputs.values), orjson.loads(inputs.types)
                    ints = [v for v, t in zip(values, types, strict=False) if t == "Int"]
                    if len(ints) >= 2:
                        return _P2pInfo(int(ints[-2]), int(ints[-1]), size)
                break
            at = row_of_id.get(int(host.parent[at]))
        return _P2pInfo(-1, 0, size)


def _input_bytes(host: HostTrace, row: int) -> int:
    inputs = host.io_of(row)[0]
    if inputs is None:
        return 0
    count, elem = tensor_nelems(orjson.loads(inputs.values), orjson.loads(inputs.types))
    return count * elem


def _comm(
    name: str, args: CommArgs | None, p2p: _P2pInfo, ctx: CommContext, seq: dict[str, int]
) -> tuple[TaskKind, dict[str, Any]]:
    kind = kind_of(args.collective) if args is not None else None
    kind = kind if kind is not None else kind_of(name)
    pg = (args.pg_name if args else "") or "0"
    ranks = ctx.groups.get(pg) or (args.pg_ranks if args else ()) or tuple(range(ctx.world_size))
    size = args.in_nelems * args.elem_bytes if args else p2p.size
    attrs: dict[str, Any] = {"comm_size": size, "pg_name": pg}
    if kind in (SEND, RECV):
        peer = ranks[p2p.peer] if 0 <= p2p.peer < len(ranks) else ctx.rank
        src, dst = (ctx.rank, peer) if kind == SEND else (peer, ctx.rank)
        attrs["comm_src"], attrs["comm_dst"], attrs["comm_tag"] = src, dst, p2p.tag
        return (TaskKind.SEND if kind == SEND else TaskKind.RECV), attrs
    attrs["comm_type"] = int(kind) if isinstance(kind, int) else 0
    attrs[cv.PG_RANKS] = list(ranks)
    attrs[cv.COMM_SEQ] = seq.get(pg, 0)
    seq[pg] = seq.get(pg, 0) + 1
    return TaskKind.COLL, attrs
