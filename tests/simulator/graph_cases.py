"""Tiny inline rank graphs for simulator edge cases (built without protobuf)."""

from __future__ import annotations

from typing import Any

import numpy as np

from lumos.simulator.graph import COMP, RankGraph

_INT_FIELDS = (
    "stream",
    "tid",
    "dur_ns",
    "gap_ns",
    "comm_type",
    "comm_size",
    "comm_peer",
    "comm_tag",
    "comm_seq",
    "comm_dur_ns",
    "sync_stream",
    "sync_event",
)


def rank_graph(
    rank: int, nodes: list[dict[str, Any]], groups: list[tuple[int, ...]] = ()
) -> RankGraph:  # type: ignore[assignment]
    """Nodes as dicts: name, deps (indices), type, and any RankGraph field."""
    n = len(nodes)
    arrays: dict[str, Any] = {}
    for name in _INT_FIELDS:
        default = 0 if name in ("dur_ns", "gap_ns", "comm_size") else -1
        arrays[name] = np.asarray([d.get(name, default) for d in nodes], np.int64)
    arrays["type"] = np.asarray([d.get("type", COMP) for d in nodes], np.int8)
    arrays["sync_kind"] = np.asarray([int(d.get("sync_kind", 0)) for d in nodes], np.int8)
    arrays["is_cpu_op"] = np.asarray([d.get("tid", -1) >= 0 for d in nodes], bool)
    arrays["group"] = np.asarray([d.get("group", -1) for d in nodes], np.int32)
    deps = [d.get("deps", []) for d in nodes]
    arrays["dep_ptr"] = np.concatenate(([0], np.cumsum([len(x) for x in deps]))).astype(np.int64)
    arrays["dep_idx"] = np.asarray([x for ds in deps for x in ds], np.int32)
    arrays["names"] = [d.get("name", f"n{i}") for i, d in enumerate(nodes)]
    arrays["name_idx"] = np.arange(n, dtype=np.int32)
    g = RankGraph.from_arrays(rank, n, **arrays)
    g.groups = list(groups)
    return g
