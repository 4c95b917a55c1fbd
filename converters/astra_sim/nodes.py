"""What ASTRA-sim can run of one node, and the node it gets instead.

`classify` sorts a node into one of the kinds ASTRA-sim runs well (GPU compute, a
collective, a send, a receive) or into a reason to drop it (CPU op, metadata, memory,
invalid). `exported_node` writes the kept node with exactly the attributes ASTRA-sim
reads, in the value fields it reads them from; every silent repair is returned as a
`Fix` so the export can say it out loud (or refuse, in strict mode).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from lumos.converters.chakra.attrs import attr_field, get_attr, make_attr
from lumos.converters.chakra.conventions import CATEGORY, DUR_NS, SOURCE_ID, START_NS, STREAM, TID
from lumos.errors import ExportError
from lumos.proto import pb

#: Collectives ASTRA-sim simulates on the network.
SIMULATED_COLLECTIVES = frozenset({pb.ALL_REDUCE, pb.ALL_GATHER, pb.ALL_TO_ALL, pb.REDUCE_SCATTER})
INT32_MAX = 2**31 - 1
#: comm_size of the ALL_REDUCE a BARRIER becomes: one float, as NCCL's barrier.
BARRIER_BYTES = 4
INT64_MAX = 2**63 - 1


class Kind(enum.Enum):
    """What an exported node is to ASTRA-sim (or why it is dropped)."""

    COMPUTE = "GPU compute"
    COLLECTIVE = "collective"
    SEND = "send"
    RECV = "recv"
    CPU_OP = "CPU op"
    METADATA = "metadata"
    MEMORY = "memory load/store"
    INVALID = "invalid"
    #: a send or receive whose partner lies outside the window (`p2p_window`)
    CARRIED_P2P = "send/recv paired outside the window"

    @property
    def kept(self) -> bool:
        return self in _KEPT


_KEPT = frozenset({Kind.COMPUTE, Kind.COLLECTIVE, Kind.SEND, Kind.RECV})
_COMM_KIND = {
    pb.COMM_COLL_NODE: Kind.COLLECTIVE,
    pb.COMM_SEND_NODE: Kind.SEND,
    pb.COMM_RECV_NODE: Kind.RECV,
}


@dataclass(frozen=True, slots=True)
class Fix:
    """A repair the export made to one node, reported to the user."""

    rank: int
    node_id: int
    name: str
    what: str

    def __str__(self) -> str:
        return f"rank {self.rank} node {self.node_id} {self.name!r}: {self.what}"


def classify(node: pb.Node) -> Kind:
    """The kind of a source node (see Kind)."""
    if node.type in _COMM_KIND:
        return _COMM_KIND[node.type]
    if node.type == pb.COMP_NODE:
        cpu = get_attr(node, "is_cpu_op")
        if cpu is None:  # our convention: a thread id and no stream = host op
            cpu = get_attr(node, TID) is not None and get_attr(node, STREAM) is None
        return Kind.CPU_OP if cpu else Kind.COMPUTE
    if node.type == pb.METADATA_NODE:
        return Kind.METADATA
    if node.type in (pb.MEM_LOAD_NODE, pb.MEM_STORE_NODE):
        return Kind.MEMORY
    return Kind.INVALID


def duration_ns(node: pb.Node) -> int:
    """Exact duration: `dur_ns` when present, else `duration_micros` × 1000."""
    dur = get_attr(node, DUR_NS)
    return int(dur) if dur is not None else int(node.duration_micros) * 1000


def start_ns(node: pb.Node) -> int | None:
    """Recorded start in ns (`start_ns`, else `start_time_micros` when set), or None."""
    start = get_attr(node, START_NS)
    if start is not None:
        return int(start)
    return int(node.start_time_micros) * 1000 if node.start_time_micros else None


def micros(ns: int) -> int:
    """ASTRA-sim's integer microseconds, rounded half up."""
    return (ns + 500) // 1000


@dataclass(frozen=True, slots=True)
class CommTarget:
    """Where a collective runs: its comm-group id (None = all ranks) and network dims."""

    group_id: int | None
    involved_dim: list[bool]


def exported_node(
    node: pb.Node,
    kind: Kind,
    rank: int,
    target: CommTarget | None,
    fixes: list[Fix],
    *,
    replay_unsupported: bool = False,
) -> pb.Node:
    """The node as ASTRA-sim should read it (id and dependencies set by the caller).

    Raises ExportError naming rank, node and the fix if the node cannot be run.
    """
    out = pb.Node(name=node.name or f"node_{node.id}", type=node.type)
    dur = duration_ns(node)
    out.duration_micros = micros(dur)
    out.attr.append(make_attr("is_cpu_op", False))
    if kind is Kind.COMPUTE:
        _copy_roofline(node, out)
    elif kind is Kind.COLLECTIVE:
        _collective(node, out, rank, target, fixes, replay_unsupported)
    else:
        _point_to_point(node, out, kind, rank, fixes)
    if get_attr(node, "is_cpu_op") and kind is not Kind.COMPUTE:
        fixes.append(
            _fix(
                rank,
                node,
                "communication node had is_cpu_op=true (ASTRA-sim "
                "throws 'Comm node should not be on CPU'); written as false",
            )
        )
    out.attr.append(make_attr(DUR_NS, dur))
    out.attr.append(make_attr(SOURCE_ID, int(node.id)))
    start = start_ns(node)
    if start is not None:
        out.attr.append(make_attr(START_NS, start))
    stream = get_attr(node, STREAM)
    if stream is not None:
        out.attr.append(make_attr(STREAM, int(stream)))
    return out


def delay_node(before: pb.Node, gap_ns: int) -> pb.Node:
    """A GPU compute node that stands for CPU time the GPU sat idle waiting for."""
    out = pb.Node(name=f"cpu_gap_before:{before.name}", type=pb.COMP_NODE)
    out.duration_micros = micros(gap_ns)
    out.attr.extend(
        [make_attr("is_cpu_op", False), make_attr(DUR_NS, gap_ns), make_attr(CATEGORY, "cpu_gap")]
    )
    return out


def _copy_roofline(node: pb.Node, out: pb.Node) -> None:
    for name in ("num_ops", "tensor_size"):
        value = get_attr(node, name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            out.attr.append(make_attr(name, min(int(value), INT64_MAX)))


def _collective(
    node: pb.Node,
    out: pb.Node,
    rank: int,
    target: CommTarget | None,
    fixes: list[Fix],
    replay_unsupported: bool,
) -> None:
    comm_type = get_attr(node, "comm_type")
    if not isinstance(comm_type, int) or comm_type not in pb.CollectiveCommType.values():
        raise ExportError(
            f"rank {rank} node {node.id} {node.name!r}: collective without a valid comm_type "
            f"(found {comm_type!r}); set comm_type to a CollectiveCommType (int64)"
        )
    if comm_type == pb.REDUCE_SCATTER_BLOCK:
        fixes.append(_fix(rank, node, "REDUCE_SCATTER_BLOCK exported as REDUCE_SCATTER"))
        comm_type = pb.REDUCE_SCATTER
    elif comm_type == pb.BARRIER:
        fixes.append(
            _fix(
                rank,
                node,
                f"BARRIER exported as an ALL_REDUCE of {BARRIER_BYTES} B over its group "
                "(how NCCL runs a barrier; ASTRA-sim has no barrier)",
            )
        )
        out.attr.append(make_attr("comm_type", pb.ALL_REDUCE))
        out.attr.append(make_attr("comm_size", BARRIER_BYTES))
        _group_attrs(out, target)
        return
    elif comm_type not in SIMULATED_COLLECTIVES and comm_type != pb.BROADCAST:
        type_name = pb.CollectiveCommType.Name(comm_type)
        if not replay_unsupported:
            raise ExportError(
                f"rank {rank} node {node.id} {node.name!r}: ASTRA-sim cannot run a {type_name} "
                "collective (it throws 'Unsupported collective comm type'); pass "
                "--replay-unsupported-comms to replay it by its recorded duration, or "
                "rewrite it as ALL_REDUCE/ALL_GATHER/REDUCE_SCATTER/ALL_TO_ALL"
            )
        fixes.append(_fix(rank, node, f"{type_name} replayed by its duration (as BROADCAST)"))
        comm_type = pb.BROADCAST
    out.attr.append(make_attr("comm_type", comm_type))
    size = _comm_size(node, rank, fixes, required=comm_type != pb.BROADCAST)
    # ASTRA-sim reads comm_size of every collective before it looks at the type: a
    # BROADCAST without it never finishes (the rank hangs and the binary exits 0)
    out.attr.append(make_attr("comm_size", 0 if size is None else size))
    _group_attrs(out, target)


def _group_attrs(out: pb.Node, target: CommTarget | None) -> None:
    if target is not None:
        if target.group_id is not None:
            out.attr.append(make_attr("pg_name", str(target.group_id)))
        out.attr.append(make_attr("involved_dim", target.involved_dim))


def _point_to_point(node: pb.Node, out: pb.Node, kind: Kind, rank: int, fixes: list[Fix]) -> None:
    peer_name = "comm_dst" if kind is Kind.SEND else "comm_src"
    peer = _int_attr(node, peer_name)
    if peer is None:
        raise ExportError(
            f"rank {rank} node {node.id} {node.name!r}: {kind.value} without {peer_name}; "
            f"set {peer_name} (int32) to the peer rank"
        )
    own_name = "comm_src" if kind is Kind.SEND else "comm_dst"
    own = _int_attr(node, own_name)
    if own is not None and own != rank:
        raise ExportError(
            f"rank {rank} node {node.id} {node.name!r}: {kind.value} with {own_name}={own} in "
            f"rank {rank}'s file (ASTRA-sim throws: it must be issued by rank {own}); fix "
            f"{own_name} or move the node"
        )
    tag = _int_attr(node, "comm_tag")
    if tag is None:
        fixes.append(_fix(rank, node, "no comm_tag; written as 0"))
        tag = 0
    for name, value in ((own_name, rank), (peer_name, peer), ("comm_tag", tag)):
        if not 0 <= value <= INT32_MAX:
            raise ExportError(
                f"rank {rank} node {node.id} {node.name!r}: {name}={value} does not fit int32"
            )
    src, dst = (rank, peer) if kind is Kind.SEND else (peer, rank)
    size = _comm_size(node, rank, fixes, required=True)
    out.attr.extend(
        [
            make_attr("comm_src", src),
            make_attr("comm_dst", dst),
            make_attr("comm_tag", tag),
            make_attr("comm_size", size),
        ]
    )


def _comm_size(node: pb.Node, rank: int, fixes: list[Fix], *, required: bool) -> int | None:
    found = next((a for a in node.attr if a.name == "comm_size"), None)
    value = get_attr(node, "comm_size")
    if found is None or not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        if not required:
            return None
        what = "no comm_size" if found is None else f"comm_size={value!r}"
        raise ExportError(
            f"rank {rank} node {node.id} {node.name!r}: {what} (ASTRA-sim never finishes it: "
            "'unreleased nodes'); set comm_size (int64, bytes; all-gather: the per-rank "
            "shard) on this node"
        )
    if value > INT64_MAX:
        raise ExportError(
            f"rank {rank} node {node.id} {node.name!r}: comm_size={value} does not fit int64"
        )
    field = attr_field(found)
    if field != "int64_val":
        fixes.append(
            _fix(
                rank,
                node,
                f"comm_size stored as {field}; rewritten as int64_val "
                "(readers that read only int64 see 0)",
            )
        )
    return int(value)


def _int_attr(node: pb.Node, name: str) -> int | None:
    value = get_attr(node, name)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return int(value)


def _fix(rank: int, node: pb.Node, what: str) -> Fix:
    return Fix(rank, int(node.id), node.name, what)
