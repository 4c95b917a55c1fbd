"""A rank's `RankGraph` from the columns `et_columns` decodes, the same as `graph_from_et`.

The fast nodes' columns are used as decoded; the few nodes kept as frames (`slow`) are
parsed by protobuf and filled by the same code `graph_from_et` runs (`fill_attrs`), so
both paths give identical graphs. Then, as there: nodes in ascending id order (stable),
names numbered by first appearance, dependency ids turned into indices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, cast

import numpy as np
from google.protobuf.message import DecodeError

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.stream import checked_count
from lumos.errors import TraceFormatError
from lumos.limits import MAX_RANK_NODES
from lumos.proto import pb
from lumos.simulator.et_columns import Columns, read_columns
from lumos.simulator.graph import RankGraph
from lumos.simulator.graph_build import (
    check_durations,
    dep_csr,
    fill_attrs,
    fill_metadata,
    wanted_attrs,
)
from lumos.simulator.heap import TRIM_MIN_NODES, trim


def read_graph(rank: int, stream: IO[bytes], path: str, repair: bool = False) -> RankGraph:
    """One rank's graph from its `.et` stream (see `graph_build.graph_from_et`).

    Raises TraceFormatError naming `path` (and the node) for unreadable data, duplicate
    ids, or dangling dependencies unless `repair`.
    """
    frame, cols = read_columns(stream, path)
    return graph_from_columns(rank, parse_metadata(frame, path), cols, path, repair)


def parse_metadata(frame: bytes, path: str) -> pb.GlobalMetadata:
    """The GlobalMetadata message. Raises TraceFormatError naming `path` if it is bad."""
    metadata = pb.GlobalMetadata()
    try:
        metadata.ParseFromString(frame)
    except DecodeError as exc:
        raise TraceFormatError(path, f"bad GlobalMetadata: {exc}", where="byte 0") from None
    return metadata


def _cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    out = np.concatenate(parts) if parts else np.zeros(0, dtype)
    parts.clear()
    return out.astype(dtype, copy=False)


def graph_from_columns(
    rank: int, metadata: pb.GlobalMetadata, cols: Columns, source: str, repair: bool
) -> RankGraph:
    """Assemble the graph (consumes `cols`). Raises as `read_graph`, and TraceFormatError
    if the file holds fewer (cut short) or more nodes than its metadata's `node_count`."""
    n = MAX_RANK_NODES.check(cols.count, f"{source}: nodes of one rank's ET")  # all parts
    stated = checked_count(metadata, source)
    if stated is not None and n != stated:  # what EtReader refuses, simulate refuses too
        raise TraceFormatError(
            source,
            f"holds {n:,} nodes but its metadata says {stated:,}: "
            + ("the file was cut short" if n < stated else "nodes were appended"),
        )
    ids = _cat(cols.ids, np.int64)
    name_idx = _cat(cols.name_idx, np.int32)
    typ = _cat(cols.type, np.int8)
    dur_us = _cat(cols.dur_us, np.int64)
    dur_ns = _cat(cols.dur_ns, np.int64)
    owner = _cat(cols.dep_owner, np.int64)
    flat = _cat(cols.dep_id, np.int64)
    slow = _parse_slow(cols, source)
    names = {raw: i for i, raw in enumerate(cols.names.raw)}
    renamed = False  # whether a protobuf-read node's name moved the first appearances
    if slow:
        at = np.fromiter(slow, np.int64, len(slow))
        nodes = list(slow.values())
        ids[at] = [node.id for node in nodes]
        typ[at] = [node.type for node in nodes]
        check_durations(nodes, source, rank)
        us = [node.duration_micros * 1000 for node in nodes]
        dur_us[at] = us
        dur_ns[at] = [d or -1 for d in us]
        before = name_idx[at]
        name_idx[at] = [names.setdefault(node.name.encode(), len(names)) for node in nodes]
        renamed = len(names) > len(cols.names.raw) or bool((name_idx[at] != before).any())
        deps = [node.deps for node in nodes]
        counts = np.fromiter(map(len, deps), np.int64, len(deps))
        more = np.fromiter((d for ds in deps for d in ds), np.int64, int(counts.sum()))
        # slow nodes have no dependencies in the columns: insert theirs in owner order
        slots = np.repeat(np.searchsorted(owner, at, side="right"), counts)
        owner = np.insert(owner, slots, np.repeat(at, counts))
        flat = np.insert(flat, slots, more)
    perm = None
    if n > 1 and bool((np.diff(ids) < 0).any()):
        perm = np.argsort(ids, kind="stable")
        inverse = np.empty(n, np.int64)
        inverse[perm] = np.arange(n)
        ids, name_idx, typ, dur_us, dur_ns = (a[perm] for a in (ids, name_idx, typ, dur_us, dur_ns))
        owner = inverse[owner]
        order = np.argsort(owner, kind="stable")
        owner, flat = owner[order], flat[order]
    table = _name_table(names, source)
    if renamed or perm is not None:  # else numbered by first appearance already
        name_idx, table = _renumber(name_idx, table)

    def where(i: int) -> str:
        return f"rank {rank} node {int(ids[i])} {table[int(name_idx[i])]!r}"

    # dependencies first, while the other columns are not yet allocated
    dep_ptr, dep_idx, dropped = dep_csr(ids, rank, owner, flat, where, source, repair)
    del owner, flat
    if n >= TRIM_MIN_NODES:
        trim()
    columns: dict[str, np.ndarray] = {}
    for name in ("is_cpu_op", "stream", "tid", "gap_ns", "start_ns"):
        column = _cat(getattr(cols, name), bool if name == "is_cpu_op" else np.int64)
        columns[name] = column if perm is None else column[perm]
    g = RankGraph.from_arrays(
        rank,
        n,
        ids=ids,
        names=table,
        name_idx=name_idx,
        type=typ,
        dur_us_ns=dur_us,
        dur_ns=dur_ns,
        pg_labels=[],
        dep_ptr=dep_ptr,
        dep_idx=dep_idx,
        **columns,
    )
    g.dropped_deps = dropped
    g.source = source
    _fill_syncs(g, cols, perm)
    if slow:
        _fill_slow(g, slow, perm)
    if n >= TRIM_MIN_NODES:
        trim()
    fill_metadata(g, metadata)
    return g


@dataclass(slots=True)
class _Slim:
    """What `fill_attrs` reads of a protobuf-read node (the message itself is dropped)."""

    type: int
    inputs: pb.IOInfo


@dataclass(slots=True)
class _Slow:
    """One protobuf-read node: its structure and its wanted attributes."""

    id: int
    type: int
    duration_micros: int
    name: str
    deps: tuple[int, ...]
    attrs: dict[str, object]
    node: _Slim


def _parse_slow(cols: Columns, source: str) -> dict[int, _Slow]:
    out = {}
    for index, offset, frame in cols.slow:
        node = pb.Node()
        try:
            node.ParseFromString(frame)
        except DecodeError as exc:
            raise TraceFormatError(
                source, f"node #{index} does not parse: {exc}", where=f"byte {offset}"
            ) from None
        attrs = wanted_attrs(node.attr) if node.attr else {}
        inputs = pb.IOInfo()
        if attrs.get(cv.DUR_ESTIMATED):
            inputs.CopyFrom(node.inputs)
        out[index] = _Slow(
            node.id,
            node.type,
            node.duration_micros,
            node.name,
            (*node.data_deps, *node.ctrl_deps),
            attrs,
            _Slim(node.type, inputs),
        )
    cols.slow.clear()
    return out


def _fill_slow(g: RankGraph, slow: dict[int, _Slow], perm: np.ndarray | None) -> None:
    """Attribute columns of the protobuf-read nodes, as `graph_from_et` fills them."""
    if perm is not None:
        inverse = np.empty(len(perm), np.int64)
        inverse[perm] = np.arange(len(perm))
        slow = {int(inverse[i]): node for i, node in slow.items()}
    items = [(i, slow[i].attrs) for i in sorted(slow) if slow[i].attrs]
    label_ids: dict[str, int] = {}
    nodes = {i: slow[i].node for i, _ in items}
    fill_attrs(g, items, cast(Mapping[int, pb.Node], nodes), label_ids)
    g.pg_labels = list(label_ids)


def _fill_syncs(g: RankGraph, cols: Columns, perm: np.ndarray | None) -> None:
    """The runtime syncs the columns decoded (the protobuf-read nodes' come later)."""
    if not cols.sync:
        return
    node, kind, stream, event = (np.concatenate(c) for c in zip(*cols.sync, strict=True))
    cols.sync.clear()
    if perm is not None:
        inverse = np.empty(len(perm), np.int64)
        inverse[perm] = np.arange(len(perm))
        node = inverse[node]
    g.sync_kind[node] = kind
    g.sync_stream[node] = stream
    g.sync_event[node] = event


def _name_table(names: dict[bytes, int], source: str) -> list[str]:
    try:
        return [raw.decode() for raw in names]
    except UnicodeDecodeError as exc:
        raise TraceFormatError(source, f"a node name is not UTF-8: {exc}") from None


def _renumber(name_idx: np.ndarray, table: list[str]) -> tuple[np.ndarray, list[str]]:
    """Names numbered by first appearance in node order (unused names dropped)."""
    used, first = np.unique(name_idx, return_index=True)
    order = np.argsort(first)
    remap = np.zeros(len(table), np.int32)
    remap[used[order]] = np.arange(len(used), dtype=np.int32)
    return remap[name_idx], [table[int(k)] for k in used[order]]
