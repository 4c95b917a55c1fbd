"""Summaries of Chakra ETs: node counts by type, collectives by type and bytes, per rank.

`lumos et info` prints these; they are computed in one streaming pass per file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from lumos.converters.chakra.attrs import attr_value
from lumos.converters.chakra.files import EtSource
from lumos.proto import pb

NODE_TYPE_NAMES = {v: k for k, v in pb.NodeType.items()}
COMM_TYPE_NAMES = {v: k for k, v in pb.CollectiveCommType.items()}


@dataclass(slots=True)
class CommStat:
    """Count and total bytes of one kind of communication."""

    count: int = 0
    bytes: int = 0
    unsized: int = 0  # nodes without comm_size


@dataclass(slots=True)
class RankInfo:
    """What one rank's file holds."""

    rank: int
    path: str
    version: str
    schema: str | None
    nodes: int = 0
    deps: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    collectives: dict[str, CommStat] = field(default_factory=dict)
    p2p: dict[str, CommStat] = field(default_factory=dict)
    process_groups: set[str] = field(default_factory=set)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "path": self.path,
            "version": self.version,
            "schema": self.schema,
            "nodes": self.nodes,
            "deps": self.deps,
            "by_type": dict(sorted(self.by_type.items())),
            "collectives": {k: _stat(v) for k, v in sorted(self.collectives.items())},
            "p2p": {k: _stat(v) for k, v in sorted(self.p2p.items())},
            "process_groups": sorted(self.process_groups),
        }


def _stat(s: CommStat) -> dict[str, int]:
    return {"count": s.count, "bytes": s.bytes, "unsized": s.unsized}


@dataclass(slots=True)
class TraceInfo:
    """Per-rank summaries of one trace, with totals."""

    prefix: str
    ranks: list[RankInfo]

    @property
    def total_nodes(self) -> int:
        return sum(r.nodes for r in self.ranks)

    def totals_by_type(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for r in self.ranks:
            total.update(r.by_type)
        return total

    def totals_collectives(self) -> dict[str, CommStat]:
        total: dict[str, CommStat] = {}
        for r in self.ranks:
            for kind, s in [*r.collectives.items(), *r.p2p.items()]:
                t = total.setdefault(kind, CommStat())
                t.count += s.count
                t.bytes += s.bytes
                t.unsized += s.unsized
        return total

    def to_dict(self) -> dict[str, Any]:
        return {
            "prefix": self.prefix,
            "num_ranks": len(self.ranks),
            "total_nodes": self.total_nodes,
            "by_type": dict(sorted(self.totals_by_type().items())),
            "communication": {k: _stat(v) for k, v in sorted(self.totals_collectives().items())},
            "ranks": [r.to_dict() for r in self.ranks],
        }


def rank_info(source: EtSource) -> RankInfo:
    """Summarise one rank's file in a single streaming pass."""
    with source.open() as reader:
        meta = reader.metadata
        schema = next((str(attr_value(a)) for a in meta.attr if a.name == "schema"), None)
        info = RankInfo(source.rank, source.path, meta.version, schema)
        by_type = info.by_type
        for node in reader:
            info.nodes += 1
            info.deps += len(node.data_deps) + len(node.ctrl_deps)
            by_type[NODE_TYPE_NAMES.get(node.type, str(node.type))] += 1
            if node.type < pb.COMM_SEND_NODE:
                continue
            values = {a.name: attr_value(a) for a in node.attr}
            size = values.get("comm_size")
            if node.type == pb.COMM_COLL_NODE:
                comm_type = values.get("comm_type")
                kind = (
                    COMM_TYPE_NAMES.get(comm_type, "UNKNOWN")
                    if isinstance(comm_type, int)
                    else "UNKNOWN"
                )
                stat = info.collectives.setdefault(kind, CommStat())
                group = values.get("pg_name")
                if group not in (None, ""):
                    info.process_groups.add(str(group))
            else:
                kind = "SEND" if node.type == pb.COMM_SEND_NODE else "RECV"
                stat = info.p2p.setdefault(kind, CommStat())
            stat.count += 1
            if isinstance(size, int):
                stat.bytes += size
            else:
                stat.unsized += 1
    return info


def trace_info(sources: Iterable[EtSource]) -> TraceInfo:
    """Summaries of all ranks of a trace."""
    ranks = [rank_info(s) for s in sources]
    return TraceInfo(ranks[0].path if not ranks else _prefix(ranks), ranks)


def _prefix(ranks: list[RankInfo]) -> str:
    return ranks[0].path.rsplit(".", 2)[0] if ranks[0].path.endswith(".et") else ranks[0].path
