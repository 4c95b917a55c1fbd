"""Hand-made Chakra ETs with the attributes the converter writes, for the replay-fidelity
tests: recorded `start_ns` / `dur_ns` (ns since the rank's step start), `tid` / `stream`,
`gap_ns`, sync attributes, and the GlobalMetadata `measured_step_ns` / `step_start_ns`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos.converters.chakra.attrs import add_attrs, set_attr
from lumos.converters.chakra.conventions import (
    DUR_NS,
    GAP_NS,
    META_STEP_NS,
    META_STEP_START_NS,
    PG_RANKS,
    START_NS,
    STREAM,
    TID,
)
from lumos.converters.chakra.stream import write_et
from lumos.proto import pb

US = 1_000  # ns per µs


@dataclass
class Rank:
    """One rank's nodes as written; times in µs, converted to ns on write."""

    rank: int
    step_us: int | None
    step_start_ns: int | None = None
    nodes: list[pb.Node] = field(default_factory=list)

    def _node(self, name: str, ntype: int, start: int, dur: int, deps: list[int]) -> pb.Node:
        node = pb.Node(id=len(self.nodes) + 1, name=name, type=ntype, duration_micros=dur)
        node.ctrl_deps.extend(deps)
        add_attrs(node, [(START_NS, start * US), (DUR_NS, dur * US)])
        self.nodes.append(node)
        return node

    def cpu(
        self,
        name: str,
        start: int,
        dur: int,
        deps: list[int] | None = None,
        gap: int = 0,
        **attrs: Any,
    ) -> int:
        """A host op on thread 1 (dependencies as the converter writes them: the
        previous op on the thread, the GPU op a sync waits for)."""
        node = self._node(name, pb.COMP_NODE, start, dur, list(deps or []))
        add_attrs(node, [(TID, 1), ("is_cpu_op", True), (GAP_NS, gap * US), *attrs.items()])
        return node.id

    def gpu(self, name: str, start: int, dur: int, deps: list[int], stream: int = 7) -> int:
        """A kernel on `stream`, launched by the CPU node in `deps`."""
        node = self._node(name, pb.COMP_NODE, start, dur, deps)
        add_attrs(node, [(STREAM, stream), ("is_cpu_op", False)])
        return node.id

    def all_reduce(self, start: int, dur: int, deps: list[int], group: list[int]) -> int:
        """A gloo all-reduce on thread 1 (CPU communication, as a CPU capture records it)."""
        node = self._node("gloo:all_reduce", pb.COMM_COLL_NODE, start, dur, deps)
        add_attrs(
            node,
            [
                (TID, 1),
                ("is_cpu_op", True),
                ("comm_type", 0),
                ("comm_size", 1 << 20),
                ("pg_name", "0"),
            ],
        )
        set_attr(node, PG_RANKS, group, "int64_list")
        return node.id


def write_ranks(folder: Path, ranks: list[Rank], prefix: str = "t") -> Path:
    """Write one `<prefix>.<rank>.et` per rank; returns the prefix path."""
    for r in ranks:
        meta = pb.GlobalMetadata(version="0.0.4")
        if r.step_us is not None:
            set_attr(meta, META_STEP_NS, r.step_us * US)
        if r.step_start_ns is not None:
            set_attr(meta, META_STEP_START_NS, r.step_start_ns)
        set_attr(meta, "rank", r.rank)
        write_et(folder / f"{prefix}.{r.rank}.et", meta, r.nodes)
    return folder / prefix
