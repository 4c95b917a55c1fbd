"""The simulator's own graph of one rank: compact numpy arrays built from a Chakra ET.

One `RankGraph` per rank, nodes sorted by ET id (so "ascending id" = ascending index).
Dependencies are stored as predecessor lists in CSR form (`dep_ptr`, `dep_idx`: node
*indices*, not ids); `data_deps` and `ctrl_deps` are merged (both are honoured). The
simulator never sees protobuf objects: graphs come from `graph_from_et` (any producer's
ET) or are built directly from arrays (`RankGraph.from_arrays`, for generators and
benchmarks). Missing values are -1 in integer arrays.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import chain
from operator import attrgetter

import numpy as np
from lumos.converters import conventions as cv
from lumos.converters.attrs import attr_value
from lumos.proto import pb

from lumos.errors import TraceFormatError

COMP, SEND, RECV, COLL = pb.COMP_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE, pb.COMM_COLL_NODE
METADATA, INVALID = pb.METADATA_NODE, pb.INVALID_NODE
COMM_TYPES = (SEND, RECV, COLL)


class SyncKind(IntEnum):
    """Runtime synchronisation role of a (CPU) node, from `sync_kind` / `event_record`."""

    NONE = 0
    DEVICE = 1
    STREAM = 2
    EVENT = 3
    STREAM_WAIT_EVENT = 4
    EVENT_RECORD = 5


_SYNC_NAMES = {
    "device": SyncKind.DEVICE,
    "stream": SyncKind.STREAM,
    "event": SyncKind.EVENT,
    "stream_wait_event": SyncKind.STREAM_WAIT_EVENT,
}


@dataclass(slots=True)
class RankGraph:
    """The nodes of one rank as parallel arrays (length n unless noted).

    - `ids` int64: ET node ids (ascending); `name_idx` int32 into `names`;
    - `type` int8: Chakra NodeType; `is_cpu_op` bool; `stream`, `tid` int64 (-1 = absent);
    - `dur_ns` int64: recorded duration in ns (`dur_ns`, else `duration_micros`×1000),
      -1 when nothing was recorded (no `dur_ns` and `duration_micros` = 0);
      `dur_us_ns` int64: `duration_micros`×1000 exactly as ASTRA-sim reads it;
      `gap_ns` int64: untraced CPU time before a CPU node (0 if absent);
      `start_ns` int64: recorded start relative to the step start (-1 if absent);
    - `dep_ptr` int64 (n+1), `dep_idx` int32: predecessors of node i are
      `dep_idx[dep_ptr[i]:dep_ptr[i+1]]`;
    - communication: `comm_type` int16, `comm_size` int64, `comm_peer` int32 (a send's
      `comm_dst`, a receive's `comm_src`), `comm_tag` int32, `comm_seq` int64,
      `comm_dur_ns` int64, `pg_label` int32 into `pg_labels` (the raw `pg_name`),
      `group` int32 into `groups` (resolved member lists, global ranks in group order;
      filled by `resolve_groups`, -1 until then);
    - sync: `sync_kind` int8 (`SyncKind`), `sync_stream`, `sync_event` int64 (for an
      event record, `sync_event` holds the recorded event id).

    For the compute cost model (`lumos.simulator.estimate`): `op_inputs[i]` = the
    (shapes, types, values) strings of a node marked `dur_estimated`, `op_work[i]` =
    (`num_ops`, `tensor_size`) of a compute node with no recorded duration.

    From the metadata: `measured_step_ns` (Kineto ProfilerStep duration) and
    `step_start_ns` (its absolute start on the trace clock, for aligning ranks).
    """

    rank: int
    ids: np.ndarray
    names: list[str]
    name_idx: np.ndarray
    type: np.ndarray
    is_cpu_op: np.ndarray
    stream: np.ndarray
    tid: np.ndarray
    dur_ns: np.ndarray
    dur_us_ns: np.ndarray
    gap_ns: np.ndarray
    start_ns: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    comm_type: np.ndarray
    comm_size: np.ndarray
    comm_peer: np.ndarray
    comm_tag: np.ndarray
    comm_seq: np.ndarray
    comm_dur_ns: np.ndarray
    pg_label: np.ndarray
    pg_labels: list[str]
    group: np.ndarray
    sync_kind: np.ndarray
    sync_stream: np.ndarray
    sync_event: np.ndarray
    groups: list[tuple[int, ...]] = field(default_factory=list)
    pg_ranks: dict[int, tuple[int, ...]] = field(default_factory=dict)
    world_size: int | None = None
    process_groups: dict[str, tuple[int, ...]] = field(default_factory=dict)
    measured_step_ns: int | None = None
    step_start_ns: int | None = None
    source: str = ""
    dropped_deps: int = 0
    op_inputs: dict[int, tuple[str, str, str]] = field(default_factory=dict)
    op_work: dict[int, tuple[float, float]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def name(self, i: int) -> str:
        return self.names[int(self.name_idx[i])]

    def where(self, i: int) -> str:
        """'rank R node ID "name"' for error messages."""
        return f"rank {self.rank} node {int(self.ids[i])} {self.name(i)!r}"

    def deps(self, i: int) -> np.ndarray:
        return self.dep_idx[self.dep_ptr[i] : self.dep_ptr[i + 1]]

    @classmethod
    def from_arrays(cls, rank: int, n: int, **arrays: object) -> RankGraph:
        """Build a graph of `n` nodes; arrays not given get their "absent" default.

        Required: `dep_ptr` and `dep_idx` (or none: no dependencies). For generators and
        benchmarks that never write protobuf.
        """
        defaults: dict[str, object] = {
            "ids": np.arange(n, dtype=np.int64),
            "names": ["node"],
            "name_idx": np.zeros(n, np.int32),
            "type": np.full(n, COMP, np.int8),
            "is_cpu_op": np.zeros(n, bool),
            "dur_ns": np.zeros(n, np.int64),
            "gap_ns": np.zeros(n, np.int64),
            "dep_ptr": np.zeros(n + 1, np.int64),
            "dep_idx": np.zeros(0, np.int32),
            "pg_labels": [],
        }
        for name in ("stream", "tid", "start_ns", "comm_type", "comm_peer", "comm_tag", "comm_seq"):
            defaults[name] = np.full(n, -1, np.int64)
        for name in ("comm_dur_ns", "sync_stream", "sync_event"):
            defaults[name] = np.full(n, -1, np.int64)
        defaults["comm_size"] = np.zeros(n, np.int64)
        defaults["pg_label"] = np.full(n, -1, np.int32)
        defaults["group"] = np.full(n, -1, np.int32)
        defaults["sync_kind"] = np.zeros(n, np.int8)
        defaults.update(arrays)
        if "dur_us_ns" not in arrays:
            defaults["dur_us_ns"] = np.maximum(np.asarray(defaults["dur_ns"]), 0)
        return cls(rank=rank, **defaults)  # type: ignore[arg-type]


def _int(value: object, default: int = -1) -> int:
    if value is None:
        return default
    if isinstance(value, list):
        return int(value[0]) if value else default
    return int(value)  # type: ignore[call-overload]


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
    cv.SYNC_KIND,
    cv.SYNC_STREAM,
    cv.SYNC_EVENT,
    cv.EVENT_RECORD,
    cv.DUR_ESTIMATED,
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
    items = []
    for i, node in enumerate(node_list):
        attrs = node.attr
        if attrs:
            a = _wanted_attrs(attrs)
            if a:
                items.append((i, a))
    label_ids: dict[str, int] = {}
    _fill_attrs(g, items, node_list, label_ids)
    g.pg_labels = list(label_ids)
    _fill_deps(g, deps, source, repair)
    _fill_metadata(g, metadata)
    g.source = source
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
_RARE = frozenset({cv.DUR_ESTIMATED, cv.FLOPS, cv.BYTES, cv.SYNC_KIND, cv.EVENT_RECORD})


def _int_column(items: list[tuple[int, dict[str, object]]], key: str, default: int) -> list[int]:
    """`_int(a.get(key), default)` for every item (plain ints taken as they are)."""
    get = [a.get(key) for _, a in items]
    return [v if type(v) is int else _int(v, default) for v in get]


def _wanted_attrs(attrs: Iterable[pb.AttributeProto]) -> dict[str, object]:
    """The attributes the simulator reads (last one wins), decoded."""
    a: dict[str, object] = {}
    for x in attrs:
        name = x.name
        if name in _WANTED:
            a[name] = _GETTERS[x.WhichOneof("value")](x)
    return a


def _fill_attrs(
    g: RankGraph,
    items: list[tuple[int, dict[str, object]]],
    node_list: list[pb.Node],
    label_ids: dict[str, int],
) -> None:
    """Set the attribute columns of the nodes in `items` ((index, wanted attributes)),
    a column at a time; communication, cost-model and sync attributes node by node."""
    if not items:
        return
    idx = [i for i, _ in items]
    durs = [(i, a[cv.DUR_NS]) for i, a in items if a.get(cv.DUR_NS) is not None]
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
        elif g.dur_ns[i] <= 0 and (cv.FLOPS in a or cv.BYTES in a):
            flops, size = a.get(cv.FLOPS) or 0, a.get(cv.BYTES) or 0
            g.op_work[i] = (float(flops), float(size))  # type: ignore[arg-type]
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
    g.comm_type[i] = _int(a.get("comm_type"))
    g.comm_size[i] = max(_int(a.get("comm_size"), 0), 0)
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
    """CSR predecessors (node indices) from each node's dependency ids, in order, each
    predecessor once; vectorised: ids map to indices by binary search on sorted ids."""
    n = len(g)
    if n > 1 and not bool((np.diff(g.ids) > 0).all()):
        dup = int(g.ids[np.nonzero(np.diff(g.ids) == 0)[0][0]])
        raise TraceFormatError(source, f"rank {g.rank}: node id {dup} appears twice")
    counts = np.fromiter(map(len, deps), np.int64, n)
    flat = np.fromiter(chain.from_iterable(deps), np.int64, int(counts.sum()))
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    pos = np.minimum(np.searchsorted(g.ids, flat), max(n - 1, 0))
    found = g.ids[pos] == flat if n else np.zeros(len(flat), bool)
    if not found.all():
        if not repair:
            first = int(np.argmin(found))
            raise TraceFormatError(
                source,
                f"{g.where(int(owner[first]))} depends on node {int(flat[first])}, which is "
                "not in the file (--repair drops such dependencies)",
            )
        g.dropped_deps += int((~found).sum())
        owner, pos = owner[found], pos[found]
    _, first_seen = np.unique(owner * max(n, 1) + pos, return_index=True)
    keep = np.sort(first_seen)
    owner, pos = owner[keep], pos[keep]
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=n), out=ptr[1:])
    g.dep_ptr = ptr
    g.dep_idx = pos.astype(np.int32)


def _fill_metadata(g: RankGraph, metadata: pb.GlobalMetadata) -> None:
    meta = {x.name: attr_value(x) for x in metadata.attr}
    if cv.META_WORLD_SIZE in meta:
        g.world_size = int(meta[cv.META_WORLD_SIZE])
    if cv.META_STEP_NS in meta:
        g.measured_step_ns = int(meta[cv.META_STEP_NS])
    if cv.META_STEP_START_NS in meta:
        g.step_start_ns = int(meta[cv.META_STEP_START_NS])
    groups = meta.get(cv.META_PROCESS_GROUPS)
    if groups:
        try:
            g.process_groups = {str(k): tuple(v) for k, v in json.loads(groups).items()}
        except (ValueError, TypeError, AttributeError):
            g.process_groups = {}
