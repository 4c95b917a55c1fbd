"""Building a rank's `RankGraph` from its Chakra ET nodes (any producer).

One pass over the nodes gathers the structural fields into Python lists and decodes
only the attributes the simulator reads (`_WANTED`); the columns become numpy arrays
at the end, a column at a time, and dependency ids become predecessor indices by a
binary search over the sorted ids. Communication, cost-model and runtime-sync
attributes are handled node by node, only on the nodes that carry them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import attr_value
from lumos.errors import TraceFormatError
from lumos.proto import pb
from lumos.simulator.graph import COMM_TYPES, RECV, SEND, RankGraph, SyncKind

_SYNC_NAMES = {
    "device": SyncKind.DEVICE,
    "stream": SyncKind.STREAM,
    "event": SyncKind.EVENT,
    "stream_wait_event": SyncKind.STREAM_WAIT_EVENT,
}


def _int(value: object, default: int = -1) -> int:
    if value is None:
        return default
    if isinstance(value, list):
        return int(value[0]) if value else default
    return int(value)  # type: ignore[call-overload]


#: the longest `duration_micros` whose nanoseconds fit the simulator's int64 clock
MAX_DURATION_US = (2**63 - 1) // 1000
#: Chakra's CollectiveCommType values (ALL_REDUCE 0 .. BARRIER 9); -1: none given
_COMM_TYPE_RANGE = range(-1, max(pb.CollectiveCommType.values()) + 1)


def check_durations(nodes: Iterable[Any], source: str, rank: int) -> None:
    """Raises TraceFormatError for a node (anything with `id`, `name`,
    `duration_micros`) whose duration does not fit 64-bit nanoseconds: it would wrap to
    any number, 0 ns included."""
    for node in nodes:
        if node.duration_micros > MAX_DURATION_US:
            where = f"rank {rank} node {node.id} {node.name!r}"
            raise TraceFormatError(
                source,
                f"{where}: duration_micros {node.duration_micros} µs is past the 64-bit "
                "nanosecond clock (292 years)",
            )


_WANTED = {
    "is_cpu_op",
    cv.STREAM,
    cv.TID,
    cv.DUR_NS,
    cv.GAP_NS,
    cv.START_NS,
    "comm_type",
    "comm_size",
    "comm_src",
    "comm_dst",
    "comm_tag",
    "pg_name",
    cv.PG_RANKS,
    cv.COMM_SEQ,
    cv.COMM_DUR_NS,
    cv.COPY_AFTER_NS,
    cv.SYNC_KIND,
    cv.SYNC_STREAM,
    cv.SYNC_EVENT,
    cv.EVENT_RECORD,
    cv.DUR_ESTIMATED,
    cv.HOST_OPS,
    cv.FLOPS,
    cv.BYTES,
}


def graph_from_et(
    rank: int,
    metadata: pb.GlobalMetadata,
    nodes: Iterable[pb.Node],
    source: str = "",
    repair: bool = False,
) -> RankGraph:
    """Build one rank's graph from its ET nodes (any producer).

    Columns are gathered into Python lists in one pass over the nodes (only the
    attributes the simulator reads are decoded) and become arrays at the end.
    Raises TraceFormatError on duplicate ids, or on dependencies on absent ids (naming
    the rank, node id and name) unless `repair`: then those dependencies count as
    satisfied at t = 0 and `dropped_deps` says how many there were.
    """
    node_list = list(nodes)
    ids = [node.id for node in node_list]
    if len(ids) > 1 and bool((np.diff(np.asarray(ids, np.int64)) < 0).any()):
        node_list.sort(key=attrgetter("id"))
        ids = [node.id for node in node_list]
    n = len(node_list)
    name_ids: dict[str, int] = {}
    name_idx = [name_ids.setdefault(node.name, len(name_ids)) for node in node_list]
    types = [node.type for node in node_list]
    check_durations(node_list, source, rank)
    dur_us = [node.duration_micros * 1000 for node in node_list]
    deps = [(*node.data_deps, *node.ctrl_deps) for node in node_list]
    g = RankGraph.from_arrays(
        rank,
        n,
        ids=np.asarray(ids, np.int64),
        names=list(name_ids),
        name_idx=np.asarray(name_idx, np.int32),
        type=np.asarray(types, np.int8),
        dur_us_ns=np.asarray(dur_us, np.int64),
        dur_ns=np.asarray([d or -1 for d in dur_us], np.int64),
        pg_labels=[],
    )
    g.source = source
    items = []
    for i, node in enumerate(node_list):
        attrs = node.attr
        if attrs:
            a = wanted_attrs(attrs)
            if a:
                items.append((i, a))
    label_ids: dict[str, int] = {}
    fill_attrs(g, items, node_list, label_ids)
    g.pg_labels = list(label_ids)
    _fill_deps(g, deps, source, repair)
    fill_metadata(g, metadata)
    return g


def _list_getter(field: str) -> Callable[[pb.AttributeProto], object]:
    return lambda x: list(getattr(x, field).values)


#: Decoder of an attribute's value by its oneof field (what `attr_value` returns).
_GETTERS: dict[str | None, Callable[[pb.AttributeProto], object]] = {
    f.name: _list_getter(f.name) if f.name.endswith("_list") else attrgetter(f.name)
    for f in pb.AttributeProto.DESCRIPTOR.oneofs_by_name["value"].fields
}
_GETTERS[None] = lambda x: None
#: Attributes that need more than a column: cost-model inputs and runtime syncs.
_RARE = frozenset(
    {cv.DUR_ESTIMATED, cv.FLOPS, cv.BYTES, cv.SYNC_KIND, cv.EVENT_RECORD, cv.COPY_AFTER_NS}
)


def _int_column(items: list[tuple[int, dict[str, object]]], key: str, default: int) -> list[int]:
    """`_int(a.get(key), default)` for every item (plain ints taken as they are)."""
    get = [a.get(key) for _, a in items]
    return [v if type(v) is int else _int(v, default) for v in get]


def wanted_attrs(attrs: Iterable[pb.AttributeProto]) -> dict[str, object]:
    """The attributes the simulator reads (last one wins), decoded."""
    a: dict[str, object] = {}
    for x in attrs:
        name = x.name
        if name in _WANTED:
            a[name] = _GETTERS[x.WhichOneof("value")](x)
    return a


def fill_attrs(
    g: RankGraph,
    items: list[tuple[int, dict[str, object]]],
    node_list: Mapping[int, pb.Node] | Sequence[pb.Node],
    label_ids: dict[str, int],
) -> None:
    """Set the attribute columns of the nodes in `items` ((index, wanted attributes)),
    a column at a time; communication, cost-model and sync attributes node by node."""
    if not items:
        return
    idx = [i for i, _ in items]
    durs = [(i, a[cv.DUR_NS]) for i, a in items if a.get(cv.DUR_NS) is not None]
    negative = [(i, v) for i, v in durs if isinstance(v, (int, float)) and v < 0]
    if negative:  # -1 too: the columns' "none given", which a file must not say by value
        i, v = negative[0]
        raise TraceFormatError(g.source, f"{g.where(i)}: dur_ns is negative ({v})")
    if durs:
        g.dur_ns[[i for i, _ in durs]] = [int(v) for _, v in durs]  # type: ignore[call-overload]
    g.is_cpu_op[idx] = [bool(a.get("is_cpu_op", False)) for _, a in items]
    g.stream[idx] = _int_column(items, cv.STREAM, -1)
    g.tid[idx] = _int_column(items, cv.TID, -1)
    g.gap_ns[idx] = np.maximum(_int_column(items, cv.GAP_NS, 0), 0)
    g.start_ns[idx] = _int_column(items, cv.START_NS, -1)
    for i, a in items:
        node = node_list[i]
        ntype = node.type
        if ntype in COMM_TYPES:
            _fill_comm(g, i, ntype, a, label_ids)
        elif _RARE.isdisjoint(a):
            continue
        elif a.get(cv.DUR_ESTIMATED):
            g.op_inputs[i] = (node.inputs.shapes, node.inputs.types, node.inputs.values)
            leaf_ops = a.get(cv.HOST_OPS)
            if isinstance(leaf_ops, int) and leaf_ops > 1:
                g.op_host_ops[i] = leaf_ops
        elif g.dur_ns[i] <= 0 and (cv.FLOPS in a or cv.BYTES in a):
            flops, size = a.get(cv.FLOPS) or 0, a.get(cv.BYTES) or 0
            g.op_work[i] = (float(flops), float(size))  # type: ignore[arg-type]
        if cv.COPY_AFTER_NS in a:
            g.copy_after[i] = max(_int(a.get(cv.COPY_AFTER_NS), 0), 0)
        kind = a.get(cv.SYNC_KIND)
        if kind in _SYNC_NAMES:
            g.sync_kind[i] = _SYNC_NAMES[str(kind)]
            g.sync_stream[i] = _int(a.get(cv.SYNC_STREAM))
            g.sync_event[i] = _int(a.get(cv.SYNC_EVENT))
        elif cv.EVENT_RECORD in a:
            g.sync_kind[i] = SyncKind.EVENT_RECORD
            g.sync_stream[i] = _int(a.get(cv.SYNC_STREAM))
            g.sync_event[i] = _int(a.get(cv.EVENT_RECORD))


def _fill_comm(
    g: RankGraph, i: int, ntype: int, a: dict[str, object], label_ids: dict[str, int]
) -> None:
    comm_type, size = _int(a.get("comm_type")), _int(a.get("comm_size"), 0)
    if ntype not in (SEND, RECV) and comm_type not in _COMM_TYPE_RANGE:
        raise TraceFormatError(
            g.source, f"{g.where(i)}: comm_type {comm_type} is not a Chakra collective (0-9)"
        )
    if not 0 <= size < 2**63:
        raise TraceFormatError(g.source, f"{g.where(i)}: comm_size {size} is not a byte count")
    g.comm_type[i] = comm_type
    g.comm_size[i] = size
    g.comm_tag[i] = _int(a.get("comm_tag"), 0)
    if ntype == SEND:
        g.comm_peer[i] = _int(a.get("comm_dst"))
    elif ntype == RECV:
        g.comm_peer[i] = _int(a.get("comm_src"))
    g.comm_seq[i] = _int(a.get(cv.COMM_SEQ))
    g.comm_dur_ns[i] = _int(a.get(cv.COMM_DUR_NS))
    label = a.get("pg_name")
    if label is not None:
        g.pg_label[i] = label_ids.setdefault(str(label), len(label_ids))
    ranks = a.get(cv.PG_RANKS)
    if ranks:
        g.pg_ranks[i] = tuple(int(r) for r in ranks)  # type: ignore[attr-defined]


def _fill_deps(g: RankGraph, deps: list[tuple[int, ...]], source: str, repair: bool) -> None:
    """CSR predecessors from each node's dependency ids (see `fill_dep_arrays`)."""
    n = len(g)
    counts = np.fromiter(map(len, deps), np.int64, n)
    flat = np.fromiter(chain.from_iterable(deps), np.int64, int(counts.sum()))
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    fill_dep_arrays(g, owner, flat, source, repair)


def fill_dep_arrays(
    g: RankGraph, owner: np.ndarray, flat: np.ndarray, source: str, repair: bool
) -> None:
    """Set `g`'s CSR predecessors from dependency ids (see `dep_csr`)."""
    g.dep_ptr, g.dep_idx, dropped = dep_csr(g.ids, g.rank, owner, flat, g.where, source, repair)
    g.dropped_deps += dropped


def dep_csr(
    ids: np.ndarray,
    rank: int,
    owner: np.ndarray,
    flat: np.ndarray,
    where: Callable[[int], str],
    source: str,
    repair: bool,
) -> tuple[np.ndarray, np.ndarray, int]:
    """(dep_ptr, dep_idx, dependencies dropped): CSR predecessors (node indices) from
    dependency ids `flat` of nodes `owner` (ascending owners, each owner's in order),
    each predecessor once; vectorised: ids map to indices by binary search on the
    sorted `ids`. `where(i)` names node i in errors.

    Raises TraceFormatError on a duplicate id, or a dependency on an absent id unless
    `repair`.
    """
    n = len(ids)
    if n > 1 and not bool((np.diff(ids) > 0).all()):
        dup = int(ids[np.nonzero(np.diff(ids) == 0)[0][0]])
        raise TraceFormatError(source, f"rank {rank}: node id {dup} appears twice")
    if n and int(ids[-1]) - int(ids[0]) == n - 1:  # ids without holes (lumos writes them so)
        pos = np.clip(flat - ids[0], 0, n - 1)
    else:
        pos = np.minimum(np.searchsorted(ids, flat), max(n - 1, 0))
    found = ids[pos] == flat if n else np.zeros(len(flat), bool)
    dropped = 0
    if not found.all():
        if not repair:
            first = int(np.argmin(found))
            later = int((flat[~found] > ids[-1]).sum()) if n else 0
            cut = (
                f"; {later} dependencies name ids above the file's last id {int(ids[-1])}: "
                "it looks cut short"
                if later
                else ""
            )
            raise TraceFormatError(
                source,
                f"{where(int(owner[first]))} depends on node {int(flat[first])}, which is "
                f"not in the file (--repair drops such dependencies){cut}",
            )
        dropped = int((~found).sum())
        owner, pos = owner[found], pos[found]
    keep = _first_of_each(owner, pos, n)
    if keep is not None:
        owner, pos = owner[keep], pos[keep]
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=n), out=ptr[1:])
    return ptr, pos.astype(np.int32), dropped


def _first_of_each(owner: np.ndarray, pos: np.ndarray, n: int) -> np.ndarray | None:
    """Which (owner, pos) pairs to keep so each appears once (the first time), in order;
    None when none repeats. Owners with one or two dependencies — nearly all — are
    checked by comparing neighbours, only the others by sorting."""
    if len(owner) < 2:
        return None
    counts = np.bincount(owner, minlength=n)
    many = counts[owner] > 2
    keep = np.ones(len(owner), bool)
    keep[1:] = (owner[1:] != owner[:-1]) | (pos[1:] != pos[:-1]) | many[1:]
    if many.any():
        rows = np.flatnonzero(many)
        _, first_seen = np.unique(owner[rows] * max(n, 1) + pos[rows], return_index=True)
        keep[rows] = False
        keep[rows[first_seen]] = True
    return None if keep.all() else np.flatnonzero(keep)


def fill_metadata(g: RankGraph, metadata: pb.GlobalMetadata) -> None:
    """World size, measured step, node count and process groups from the ET's metadata."""
    meta = {x.name: attr_value(x) for x in metadata.attr}
    g.et_version = metadata.version
    if cv.META_WORLD_SIZE in meta:
        g.world_size = int(meta[cv.META_WORLD_SIZE])
    if cv.META_STEP_NS in meta:
        g.measured_step_ns = int(meta[cv.META_STEP_NS])
    if cv.META_STEP_START_NS in meta:
        g.step_start_ns = int(meta[cv.META_STEP_START_NS])
    if isinstance(meta.get(cv.META_NODE_COUNT), int):
        g.node_count = int(meta[cv.META_NODE_COUNT])
    groups = meta.get(cv.META_PROCESS_GROUPS)
    if groups:
        g.process_groups, _ = cv.parse_process_groups(groups)  # malformed: {} (validate says)
