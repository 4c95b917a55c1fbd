"""Turning NCCL kernels and gloo ops of one rank into COMM tasks with Chakra's attributes.

For each communication task the collective type, size, process group and, for
point-to-point ops, the peer and tag are taken from the best source available (see
`comm`): the kernel's NCCL args, the linked host ET's `record_param_comms`, the ops
enclosing its launch, then the kernel name. Collectives are numbered per group
(`comm_seq`) in time order; gloo ops in the order they were issued (`_issue_order`). A
SendRecv kernel of no named type is a batch of the P2P ops issued before it
(`p2p_batch`): one SEND or RECV task each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from lumos.converters.chakra import conventions as cv
from lumos.converters.pytorch.comm import (
    P2P_OPS,
    RECV,
    SEND,
    dims_bytes,
    dtype_bytes,
    group_ranks,
    is_gloo_op,
    kernel_kind,
    kind_of,
    known_dtype,
    param_comms_peer,
)
from lumos.converters.pytorch.host_et import CommArgs, HostTrace
from lumos.converters.pytorch.kineto import KinetoTrace
from lumos.converters.pytorch.p2p_batch import BatchFinder, is_batch_kernel, split_task
from lumos.converters.pytorch.tasks import TaskKind, TaskTable
from lumos.proto import pb

#: Kineto's argument naming a collective (`record_param_comms`, and the NCCL kernel in
#: newer releases), next to its size, dtype and group
COLLECTIVE_ARG = "Collective name"
#: Kineto's argument holding an event's record-function id
RF_ID_ARG = "Record function id"
#: host ops that issue a point-to-point send (`isend` and `send` both dispatch to it).
HOST_SEND_OPS = ("c10d::send",)


@dataclass(slots=True)
class CommContext:
    """What comm annotation needs to know about the rank besides its tasks."""

    rank: int
    world_size: int
    groups: dict[str, tuple[int, ...]]
    host: HostTrace | None = None


def annotate_comm(
    table: TaskTable, trace: KinetoTrace, host_row: np.ndarray, ctx: CommContext
) -> None:
    """Set kind and comm attributes on every communication task, in place."""
    gloo = np.array([is_gloo_op(n) for n in trace.names] or [False], bool)
    ev = table.ev
    on_gloo = (ev >= 0) & gloo[trace.name[np.maximum(ev, 0)]]
    comm = np.flatnonzero((table.kind == TaskKind.COLL) | on_gloo)
    comm = comm[np.argsort(table.start[comm], kind="stable")]
    comm = _issue_order(comm, table, trace, on_gloo)
    seq: dict[str, int] = {}
    nccl = comm[(table.kind[comm] == TaskKind.COLL) & (table.data1[comm] >= 0)]
    launches = table.ev[table.data1[nccl]]
    batches = BatchFinder(trace, launches[launches >= 0].tolist()) if len(nccl) else None
    for task in comm.tolist():
        _annotate(table, trace, host_row, ctx, task, seq, batches)


def _issue_order(
    comm: np.ndarray, table: TaskTable, trace: KinetoTrace, on_gloo: np.ndarray
) -> np.ndarray:
    """gloo ops in the order they were issued, when every one has its record-function id.

    gloo runs a rank's collectives on several worker threads, which can start them in
    another order than the program issued them (and than the other ranks did); the ids
    are handed out when the call enqueues the work, on the issuing thread, in program
    order. NCCL kernels (and traces without the ids) keep their time order.
    """
    if not len(comm) or not on_gloo[comm].all():
        return comm
    ids = [(trace.args.get(int(table.ev[t])) or {}).get(RF_ID_ARG) for t in comm.tolist()]
    if any(not isinstance(i, int) for i in ids):
        return comm
    return comm[np.argsort(np.asarray(ids, np.int64), kind="stable")]


def _annotate(
    table: TaskTable,
    trace: KinetoTrace,
    host_row: np.ndarray,
    ctx: CommContext,
    task: int,
    seq: dict[str, int],
    batches: BatchFinder | None,
) -> None:
    row = int(table.ev[task])
    attrs = table.attrs_of(task)
    chain: tuple[int, ...] = attrs.pop("_enclosing", ())
    if table.kind[task] == TaskKind.CPU:  # gloo op on its thread
        chain = (*chain, row)
    args = trace.args.get(row) or {}
    if COLLECTIVE_ARG not in args:
        args = _param_comms(chain, trace) or args
    host_comm = _host_comm(chain, host_row, ctx.host)
    kind = kind_of(str(args[COLLECTIVE_ARG])) if COLLECTIVE_ARG in args else None
    if kind is None and host_comm is not None:
        kind = kind_of(host_comm.collective)
    for outer in reversed(chain):
        if kind is None:
            kind = kind_of(trace.name_of(outer))
    if kind is None:
        kind = kernel_kind(trace.name_of(row))
    pg = (host_comm.pg_name if host_comm else "") or str(args.get("Process Group Name", ""))
    pg = pg or "0"
    ranks = _members(pg, host_comm, args, ctx, table)
    launch = int(table.ev[table.data1[task]]) if table.data1[task] >= 0 else -1
    if batches is None or launch < 0 or table.kind[task] == TaskKind.CPU:
        batches = None  # gloo ops, and kernels without a launch, are not batched
    if kind is None and batches is not None and is_batch_kernel(trace.name_of(row)):
        ops = batches.ops_before(launch, ctx.groups, ctx.world_size)
        if ops is not None:
            for piece, op in zip(split_task(table, task, len(ops)), ops, strict=True):
                _set_p2p(table, piece, ctx, op.kind, op.pg_ranks, op.peer, op.tag, op.size)
                table.attrs_of(piece)["pg_name"] = op.pg_name
            counts = table.counts.setdefault("p2p_batches", {"batches": 0, "ops": 0})
            counts["batches"] += 1
            counts["ops"] += len(ops)
            return
    size = _size(args, host_comm, chain, trace, table)
    if not size and batches is not None and kind is not None:
        size = batches.coalesced_bytes(launch, kind)
    if kind in (SEND, RECV):
        peer, tag = _peer_tag(chain, trace, host_row, ctx.host)
        if peer < 0:  # no `Concrete Inputs` (captured without record_shapes)
            peer = param_comms_peer(args, ranks)
        _set_p2p(table, task, ctx, str(kind), ranks, peer, tag, size)
        attrs["pg_name"] = pg
        return
    table.kind[task] = TaskKind.COLL
    attrs["comm_type"] = int(kind) if isinstance(kind, int) else 0
    attrs["comm_size"] = size
    attrs["pg_name"] = pg
    attrs[cv.PG_RANKS] = list(ranks)
    attrs[cv.COMM_SEQ] = seq.get(pg, 0)
    if kind is None:
        attrs["_unknown_comm"] = True
    elif not size and kind != pb.BARRIER:
        _guess(table, "size named by no source (a CUDA graph's replay carries none): 0 bytes")
    seq[pg] = seq.get(pg, 0) + 1


def _guess(table: TaskTable, what: str) -> None:
    """Count one communication op whose attribute `what` says how it was guessed."""
    guesses = table.counts.setdefault("comm_guesses", {})
    guesses[what] = guesses.get(what, 0) + 1


def _set_p2p(
    table: TaskTable,
    task: int,
    ctx: CommContext,
    kind: str,
    ranks: tuple[int, ...],
    peer: int,
    tag: int,
    size: int,
) -> None:
    """Make `task` a SEND or RECV to/from the group rank `peer` of `ranks`."""
    if 0 <= peer < len(ranks):
        peer = ranks[peer]
    elif peer < 0:
        _guess(table, f"{kind} peer named by no source (Concrete Inputs, host ET, Rank)")
    attrs = table.attrs_of(task)
    table.kind[task] = TaskKind.SEND if kind == SEND else TaskKind.RECV
    attrs["comm_src"] = ctx.rank if kind == SEND else peer
    attrs["comm_dst"] = peer if kind == SEND else ctx.rank
    attrs["comm_tag"] = tag
    attrs["comm_size"] = size


def _host_comm(
    chain: tuple[int, ...], host_row: np.ndarray, host: HostTrace | None
) -> CommArgs | None:
    if host is None:
        return None
    for outer in reversed(chain):
        comm = host.comm.get(int(host_row[outer]))
        if comm is not None and comm.collective != "wait":
            return comm
    return None


def _param_comms(chain: tuple[int, ...], trace: KinetoTrace) -> dict[str, Any]:
    """The NCCL arguments of the innermost enclosing op that has them (`record_param_comms`
    spans the launch; Kineto copies its arguments onto the kernel only in newer releases)."""
    for outer in reversed(chain):
        args = trace.args.get(outer)
        if args and COLLECTIVE_ARG in args:
            return args
    return {}


def _members(
    pg: str, host: CommArgs | None, args: dict[str, Any], ctx: CommContext, table: TaskTable
) -> tuple[int, ...]:
    """The group's global ranks: the groups the trace lists, the host ET's op, the op's
    own NCCL arguments (a group missing from `pg_config` is learned from them), else
    every rank, counted in the rank's notes."""
    known = ctx.groups.get(pg) or (host.pg_ranks if host else ())
    if known:
        return known
    ranks = group_ranks(args)
    if ranks:
        ctx.groups[pg] = ranks
        return ranks
    _guess(table, f"group {pg!r} named by no source: taken as all {ctx.world_size} ranks")
    return tuple(range(ctx.world_size))


def _size(
    args: dict[str, Any],
    host: CommArgs | None,
    chain: tuple[int, ...],
    trace: KinetoTrace,
    table: TaskTable,
) -> int:
    if host is not None and host.in_nelems and host.elem_bytes:
        return host.in_nelems * host.elem_bytes
    if "In msg nelems" in args:
        dtype = str(args.get("dtype", "float"))
        if not known_dtype(dtype):
            _guess(table, f"dtype {dtype!r} of unknown width: sized at 4 bytes an element")
        return int(args["In msg nelems"]) * dtype_bytes(dtype)
    for outer in reversed(chain):
        size = dims_bytes(trace.args.get(outer))
        if size:
            return size
    return 0


def _peer_tag(
    chain: tuple[int, ...], trace: KinetoTrace, host_row: np.ndarray, host: HostTrace | None
) -> tuple[int, int]:
    """(group-rank peer, tag) of a send/recv from its enclosing c10d op."""
    for outer in reversed(chain):
        if trace.name_of(outer) not in P2P_OPS:
            continue
        concrete = (trace.args.get(outer) or {}).get("Concrete Inputs") or []
        ints = [int(c) for c in concrete if isinstance(c, str) and c.lstrip("-").isdigit()]
        if len(ints) >= 2:
            return ints[-2], ints[-1]
        op = int(host_row[outer])
        inputs = host.io_of(op)[0] if host is not None and op >= 0 else None
        if inputs is not None:
            values = orjson.loads(inputs.values)
            nums = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
            if len(nums) >= 2:
                return nums[-2], nums[-1]
    return -1, 0
