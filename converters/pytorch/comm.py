"""Communication: which ops are collectives or point-to-point transfers, and their attributes.

A collective shows up as an NCCL kernel on a GPU stream (`ncclKernel_AllReduce_...`,
`ncclDevKernel_...`) or as a gloo annotation on a CPU thread (`gloo:all_reduce`). Its
type comes, best source first, from the kernel's own NCCL args, the host ET's
`record_param_comms`, the enclosing `nccl:<name>` / `c10d::<op>` op, then the kernel
name. Process groups come from the host ET's `## process_group:init ##`, the ET comm
attributes and Kineto's `distributedInfo.pg_config`. `check_sequences` compares every
group's collective sequence across ranks.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from lumos.proto import pb

#: collective name (as PyTorch/NCCL/gloo spell it, lower-case, no underscores) → Chakra type.
COLLECTIVES: dict[str, int] = {
    "allreduce": pb.ALL_REDUCE,
    "allreducecoalesced": pb.ALL_REDUCE,
    "reduce": pb.REDUCE,
    "allgather": pb.ALL_GATHER,
    "allgatherbase": pb.ALL_GATHER,
    "allgatherintotensor": pb.ALL_GATHER,
    "allgathercoalesced": pb.ALL_GATHER,
    "allgatherintotensorcoalesced": pb.ALL_GATHER,
    "gather": pb.GATHER,
    "scatter": pb.SCATTER,
    "broadcast": pb.BROADCAST,
    "alltoall": pb.ALL_TO_ALL,
    "alltoallv": pb.ALL_TO_ALL,
    "alltoallbase": pb.ALL_TO_ALL,
    "reducescatter": pb.REDUCE_SCATTER,
    "reducescatterbase": pb.REDUCE_SCATTER,
    "reducescattertensor": pb.REDUCE_SCATTER,
    "reducescattertensorcoalesced": pb.REDUCE_SCATTER,
    "barrier": pb.BARRIER,
}
SEND, RECV = "send", "recv"
P2P = {"send": SEND, "isend": SEND, "recv": RECV, "irecv": RECV, "recvanysource": RECV}
#: the host ops of a point-to-point transfer (their `Concrete Inputs` end with peer, tag)
P2P_OPS = ("c10d::send", "c10d::recv_", "c10d::recv", "c10d::recv_any_source_")

#: Kineto / ET dtype spellings → bytes per element.
DTYPE_BYTES: dict[str, int] = {
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "long": 8,
    "long int": 8,
    "int64": 8,
    "int": 4,
    "int32": 4,
    "short": 2,
    "bool": 1,
    "byte": 1,
    "unsigned char": 1,
    "signed char": 1,
    "char": 1,
    "uint8": 1,
    "int8": 1,
    # c10::toString(ScalarType) spellings not above, as `record_param_comms` writes its
    # `dtype` (c10/core/ScalarType.h): 8-bit floats (FP8 all-gathers), complex, unsigned
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1,
    "complexhalf": 4,
    "complexfloat": 8,
    "complexdouble": 16,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "qint8": 1,
    "quint8": 1,
    "qint32": 4,
}

#: NCCL kernel names across versions: `ncclKernel_AllReduce_RING_LL_Sum_float` (2.7-2.18),
#: `ncclDevKernel_AllGather_RING_LL`, `ncclDevKernel_SendRecv` (2.19+), and before 2.7 the
#: collective first: `ncclAllReduceRingLLKernel_sum_f32(ncclColl)`,
#: `ncclBroadcastTreeLL128Kernel_copy_i8` (NVIDIA/nccl src/collectives/device, v2.4-2.6:
#: the kernel is named `nccl<Coll><Algo><Proto>Kernel_<op>_<type>`).
_NCCL_KERNEL = re.compile(r"^(?:void )?nccl(?:Dev)?Kernel_([A-Za-z]+)")
_NCCL_KERNEL_OLD = re.compile(
    r"^(?:void )?nccl(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|Send|Recv)"
    r"(?:Ring|Tree|CollNet[A-Za-z]*)?(?:LL128|LL)?Kernel_"
)


def norm(name: str) -> str:
    """`nccl:all_reduce`, `c10d::allreduce_`, `_allgather_base` → `allreduce`, `allgatherbase`."""
    base = name.rsplit(":", 1)[-1]
    return base.replace("_", "").lower()


def is_comm_kernel(name: str) -> bool:
    """An NCCL / RCCL kernel, of any NCCL version's naming."""
    if name.startswith(("ncclKernel", "ncclDevKernel", "rccl")):
        return True
    return bool(_NCCL_KERNEL.match(name) or _NCCL_KERNEL_OLD.match(name))


def is_gloo_op(name: str) -> bool:
    return name.startswith("gloo:")


def kind_of(name: str) -> int | str | None:
    """CollectiveCommType, SEND / RECV, or None for a collective-ish name."""
    key = norm(name)
    if key in P2P:
        return P2P[key]
    return COLLECTIVES.get(key)


def kernel_kind(name: str) -> int | str | None:
    """The type an NCCL kernel name implies (SendRecv: unknown without context)."""
    match = _NCCL_KERNEL.match(name) or _NCCL_KERNEL_OLD.match(name)
    if not match:
        return None
    word = match.group(1).lower()
    if word in ("sendrecv", "send", "recv"):
        return None
    return COLLECTIVES.get(word)


def dtype_bytes(dtype: str, default: int = 4) -> int:
    return DTYPE_BYTES.get(_dtype_key(dtype), default)


def known_dtype(dtype: str) -> bool:
    """Whether `dtype_bytes` knows `dtype` (else it answers its default)."""
    return _dtype_key(dtype) in DTYPE_BYTES


def _dtype_key(dtype: str) -> str:
    key = dtype.strip().lower()
    return key.removeprefix("c10::")


def group_ranks(args: dict[str, Any]) -> tuple[int, ...]:
    """A group's global ranks from Kineto's NCCL arguments; () if they do not say.

    `Process Group Ranks` is a list in a string ("[0, 2, 4, 6]"), cut after 30 ranks with
    ", ...]" (pytorch torch/csrc/profiler/util.cpp `format_list`, kTruncatLength = 30).
    A cut list is completed from `Global rank start` / `Global rank stride` and `Group size`
    when given (the `record_param_comms` op has them), else from `Group size` when the 30
    ranks shown step evenly (how `new_group` / DeviceMesh slices are laid out).
    """
    text = args.get("Process Group Ranks")
    size = _int_or(args.get("Group size"), 0)
    start = _int_or(args.get("Global rank start"), -1)
    stride = _int_or(args.get("Global rank stride"), 0)
    if not isinstance(text, str):
        return ()
    cut = text.rstrip("] ").endswith("...")
    try:
        shown = [int(p) for p in text.strip("[] ").split(",") if p.strip() and p.strip() != "..."]
    except ValueError:
        return ()
    if not cut:
        return tuple(shown)
    if size > len(shown) and start >= 0 and stride > 0:
        return tuple(start + stride * i for i in range(size))
    steps = {b - a for a, b in itertools.pairwise(shown)}
    if size > len(shown) >= 2 and len(steps) == 1 and min(steps) > 0:
        return tuple(shown[0] + min(steps) * i for i in range(size))
    return ()


def param_comms_peer(args: dict[str, Any], ranks: tuple[int, ...]) -> int:
    """The group rank of a send's or receive's peer from its `record_param_comms`
    arguments, -1 if they do not say. They are there without `record_shapes` (which
    `Concrete Inputs` need): ProcessGroupNCCL's `send` / `recv` pass the peer's group
    rank as the op's rank (`Rank`), and `saveNcclMeta` adds its global rank as
    `Dst Rank` / `Src Rank` (pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp,
    torch/csrc/profiler/util.cpp)."""
    name = args.get("Collective name")
    key = {"send": "Dst Rank", "recv": "Src Rank"}.get(str(name))
    if key is None:
        return -1
    peer = _int_or(args.get(key), -1)
    if peer >= 0 and peer in ranks:
        return ranks.index(peer)
    return _int_or(args.get("Rank"), -1)


def _int_or(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def dims_bytes(args: dict[str, Any] | None) -> int:
    """Bytes of the first tensor input according to Kineto's Input Dims / Input type."""
    if not args:
        return 0
    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    for dim, typ in zip(dims, types, strict=False):
        shapes = dim if dim and isinstance(dim[0], list) else [dim]
        if not shapes or not all(isinstance(s, list) for s in shapes):
            continue
        count = 0
        for shape in shapes:
            n = 1
            for d in shape:
                n *= int(d)
            count += n
        if count:
            return count * dtype_bytes(str(typ) if typ != "TensorList" else "float")
    return 0


@dataclass(frozen=True, slots=True)
class ProcessGroup:
    """A process group: its PyTorch name, description and global ranks."""

    name: str
    desc: str
    ranks: tuple[int, ...]


def groups_from(
    host_groups: list[dict[str, Any]], distributed: dict[str, Any], world_size: int
) -> dict[str, ProcessGroup]:
    """Process groups by name, from the host ET's init node and Kineto's pg_config."""
    out: dict[str, ProcessGroup] = {}
    for g in list(distributed.get("pg_config") or []) + host_groups:
        name = str(g.get("pg_name", ""))
        ranks = tuple(int(r) for r in g.get("ranks") or ())
        size = int(g.get("pg_size") or g.get("group_size") or 0)
        if not ranks and (size in (0, world_size) or g.get("pg_desc") == "default_pg"):
            ranks = tuple(range(world_size))
        if name and (name not in out or not out[name].ranks):
            out[name] = ProcessGroup(name, str(g.get("pg_desc", "")), ranks)
    if "0" not in out:
        out["0"] = ProcessGroup("0", "default_pg", tuple(range(world_size)))
    return out


@dataclass(frozen=True, slots=True)
class CommRecord:
    """One communication op of one rank, for the cross-rank check."""

    rank: int
    pg_name: str
    seq: int
    kind: int | str
    size: int
    name: str
    node_id: int


def check_sequences(records: list[CommRecord], groups: dict[str, ProcessGroup]) -> list[str]:
    """Problems where a group's members disagree on their collective sequence."""
    problems: list[str] = []
    by_group: dict[str, dict[int, list[CommRecord]]] = {}
    for rec in records:
        if isinstance(rec.kind, str):
            continue  # point-to-point pairs are checked by tag, not by sequence
        by_group.setdefault(rec.pg_name, {}).setdefault(rec.rank, []).append(rec)
    for pg, per_rank in sorted(by_group.items()):
        members = [r for r in (groups[pg].ranks if pg in groups else ()) if r in per_rank]
        ranks = members or sorted(per_rank)
        ref_rank = ranks[0]
        ref = per_rank[ref_rank]
        for rank in ranks[1:]:
            seq = per_rank[rank]
            if len(seq) != len(ref):
                problems.append(
                    f"group {pg!r}: rank {rank} has {len(seq)} collectives, "
                    f"rank {ref_rank} has {len(ref)}"
                )
            for a, b in zip(ref, seq, strict=False):
                if a.kind != b.kind:
                    problems.append(
                        f"group {pg!r} collective #{a.seq}: rank {ref_rank} node {a.node_id} "
                        f"{a.name!r} vs rank {rank} node {b.node_id} {b.name!r}"
                    )
    return problems
