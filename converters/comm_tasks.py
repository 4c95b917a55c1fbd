"""Turning NCCL kernels and gloo ops of one rank into COMM tasks with Chakra's attributes.

For each communication task the collective type, size, process group and, for
point-to-point ops, the peer and tag are taken from the best source available (see
`comm`): the kernel's NCCL args, the linked host ET's `record_param_comms`, the ops
enclosing its launch, then the kernel name. Collectives are numbered per group
(`comm_seq`) in time order.
"""

from __future__ import annotations

from typing import Any

import orjson
from lumos.converters import conventions as cv
from lumos.converters.comm import (
    RECV,
    SEND,
    dims_bytes,
    dtype_bytes,
    is_gloo_op,
    kernel_kind,
    kind_of,
)
from lumos.converters.host_et import CommArgs, HostOp
from lumos.converters.kineto import KEvent
from lumos.converters.tasks import Task, TaskKind

P2P_OPS = ("c10d::send", "c10d::recv_", "c10d::recv", "c10d::recv_any_source_")


def annotate_comm(
    tasks: list[Task],
    host_by_ev: dict[int, HostOp],
    rank: int,
    world_size: int,
    groups: dict[str, tuple[int, ...]],
) -> None:
    """Set kind and comm attributes on every communication task, in place."""
    seq: dict[str, int] = {}
    comm = [t for t in tasks if t.kind is TaskKind.COLL or (t.ev and is_gloo_op(t.ev.name))]
    for task in sorted(comm, key=lambda t: (t.start, t.order)):
        ev = task.ev
        assert ev is not None
        chain: tuple[KEvent, ...] = task.attrs.pop("_enclosing", ())
        if task.kind is TaskKind.CPU:  # gloo op on its thread
            chain = (*chain, ev)
        args = ev.args or {}
        host_comm = _host_comm(chain, host_by_ev)
        kind = kind_of(str(args["Collective name"])) if "Collective name" in args else None
        if kind is None and host_comm is not None:
            kind = kind_of(host_comm.collective)
        for outer in reversed(chain):
            if kind is None:
                kind = kind_of(outer.name)
        if kind is None:
            kind = kernel_kind(ev.name)
        pg = (host_comm.pg_name if host_comm else "") or str(args.get("Process Group Name", ""))
        pg = pg or "0"
        ranks = (
            groups.get(pg) or (host_comm.pg_ranks if host_comm else ()) or tuple(range(world_size))
        )
        size = _size(args, host_comm, chain)
        if kind in (SEND, RECV):
            peer, tag = _peer_tag(chain, host_by_ev)
            if 0 <= peer < len(ranks):
                peer = ranks[peer]
            task.kind = TaskKind.SEND if kind == SEND else TaskKind.RECV
            task.attrs["comm_src"] = rank if kind == SEND else peer
            task.attrs["comm_dst"] = peer if kind == SEND else rank
            task.attrs["comm_tag"] = tag
            task.attrs["comm_size"] = size
            task.attrs["pg_name"] = pg
            continue
        task.kind = TaskKind.COLL
        task.attrs["comm_type"] = int(kind) if isinstance(kind, int) else 0
        task.attrs["comm_size"] = size
        task.attrs["pg_name"] = pg
        task.attrs[cv.PG_RANKS] = list(ranks)
        task.attrs[cv.COMM_SEQ] = seq.get(pg, 0)
        if kind is None:
            task.attrs["_unknown_comm"] = True
        seq[pg] = seq.get(pg, 0) + 1


def _host_comm(chain: tuple[KEvent, ...], host_by_ev: dict[int, HostOp]) -> CommArgs | None:
    for outer in reversed(chain):
        op = host_by_ev.get(id(outer))
        if op is not None and op.comm is not None and op.comm.collective != "wait":
            return op.comm
    return None


def _size(args: dict[str, Any], host: CommArgs | None, chain: tuple[KEvent, ...]) -> int:
    if host is not None and host.in_nelems and host.elem_bytes:
        return host.in_nelems * host.elem_bytes
    if "In msg nelems" in args:
        return int(args["In msg nelems"]) * dtype_bytes(str(args.get("dtype", "float")))
    for outer in reversed(chain):
        size = dims_bytes(outer.args)
        if size:
            return size
    return 0


def _peer_tag(chain: tuple[KEvent, ...], host_by_ev: dict[int, HostOp]) -> tuple[int, int]:
    """(group-rank peer, tag) of a send/recv from its enclosing c10d op."""
    for outer in reversed(chain):
        if outer.name not in P2P_OPS:
            continue
        concrete = (outer.args or {}).get("Concrete Inputs") or []
        ints = [int(c) for c in concrete if isinstance(c, str) and c.lstrip("-").isdigit()]
        if len(ints) >= 2:
            return ints[-2], ints[-1]
        op = host_by_ev.get(id(outer))
        if op is not None and op.inputs is not None:
            values = orjson.loads(op.inputs.values)
            nums = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
            if len(nums) >= 2:
                return nums[-2], nums[-1]
    return -1, 0
