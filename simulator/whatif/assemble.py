"""Re-assembling a step from pieces of a traced one: the primitive under every structural edit.

A *piece* is a list of nodes (copies of traced nodes, or new ones) emitted together: a
layer's forward, a micro-batch's backward on one stage, a send. `assemble` lays pieces
out in the order given, on fresh ids, and rewires their dependencies so the result runs
as the trace did, only with pieces repeated, dropped or reordered:

* a dependency inside the piece points at the copy in the same piece;
* a dependency on the same processor outside the piece is replaced by order: each node
  follows the last node emitted on its processor (CPU thread or GPU stream), so a thread
  runs its pieces back to back in the new order;
* any other dependency (a kernel on its launch, a collective on the op that issued it)
  points at the newest copy of that node emitted so far, and is dropped if there is none.

`comm_seq` is renumbered per process group in emission order of the pieces, and within a
piece in the traced `comm_seq` order (a rank's collectives on two gloo worker threads, or
streams, are emitted in node order, which can differ between ranks while their traced
sequence numbers agree), so collectives still match across ranks when every rank gets the
same edit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from lumos.converters.chakra import conventions as cv
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd


def assemble(
    pieces: Iterable[Sequence[pb.Node]], procs: Mapping[int, nd.Proc] | None = None
) -> tuple[pb.Node, ...]:
    """Lay `pieces` out in order on ids 1..n (see module doc). `procs` gives the processor
    of source nodes that are not in any piece (deps on them are then recognised as
    same-processor order); nodes in pieces are looked up directly."""
    known: dict[int, nd.Proc] = dict(procs or {})
    latest: dict[int, int] = {}
    last_on: dict[nd.Proc, int] = {}
    out: list[pb.Node] = []
    piece_of: list[int] = []
    for k, piece in enumerate(pieces):
        local: dict[int, int] = {}
        for n in piece:
            known.setdefault(n.id, nd.processor(n))
        for n in piece:
            proc = nd.processor(n)
            new_id = len(out) + 1
            data = _remap(n.data_deps, proc, local, latest, known)
            ctrl = _remap(n.ctrl_deps, proc, local, latest, known)
            internal_same = any(known.get(d) == proc for d in n.data_deps if d in local) or any(
                known.get(d) == proc for d in n.ctrl_deps if d in local
            )
            prev = last_on.get(proc)
            if prev is not None and not internal_same and prev not in data and prev not in ctrl:
                ctrl.insert(0, prev)
            c = nd.clone(n)
            c.id = new_id
            del c.data_deps[:]
            del c.ctrl_deps[:]
            c.data_deps.extend(data)
            c.ctrl_deps.extend(d for d in ctrl if d not in data)
            out.append(c)
            piece_of.append(k)
            local[n.id] = new_id
            latest[n.id] = new_id
            last_on[proc] = new_id
    _renumber_comm_seq(out, piece_of)
    return tuple(out)


def _remap(
    deps: Iterable[int],
    proc: nd.Proc,
    local: dict[int, int],
    latest: dict[int, int],
    known: Mapping[int, nd.Proc],
) -> list[int]:
    new: list[int] = []
    for d in deps:
        if d in local:
            target = local[d]
        elif known.get(d) == proc:
            continue  # same processor: emission order stands for it
        elif d in latest:
            target = latest[d]
        else:
            continue
        if target not in new:
            new.append(target)
    return new


def _renumber_comm_seq(nodes: Sequence[pb.Node], piece_of: Sequence[int]) -> None:
    """Number each group's collectives 0, 1, ... by (piece, traced `comm_seq`, emission)."""
    colls = [
        (piece_of[i], nd.int_attr(n, cv.COMM_SEQ), i)
        for i, n in enumerate(nodes)
        if n.type == pb.COMM_COLL_NODE and nd.attr(n, cv.COMM_SEQ) is not None
    ]
    seq: dict[str, int] = {}
    for _, _, i in sorted(colls):
        n = nodes[i]
        key = str(nd.attr(n, "pg_name", "")) + "|" + str(nd.attr(n, cv.PG_RANKS, ""))
        nd.put(n, cv.COMM_SEQ, seq.get(key, 0), "int64_val")
        seq[key] = seq.get(key, 0) + 1


def source_procs(nodes: Iterable[pb.Node]) -> dict[int, nd.Proc]:
    """Processor of every node by id (for `assemble`'s `procs`)."""
    return {n.id: nd.processor(n) for n in nodes}
