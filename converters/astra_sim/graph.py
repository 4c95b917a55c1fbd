"""One rank's dependency graph as the ASTRA-sim export rewrites it.

The export keeps only the nodes ASTRA-sim runs well and drops the rest (CPU ops, metadata,
memory nodes). Dependencies that ran through dropped nodes are re-pointed to the nearest
kept ancestors in one pass over a topological order (linear time, no per-node search):
each node carries a *frontier*, the kept nodes a successor must wait for, keyed by the
processor they run on. Two kept nodes on the same serial processor (a GPU stream, the
rank's collective queue) are ordered by that processor, so the frontier keeps only the
later one; `serial_chains` adds those processor-order edges so the pruning stays exact.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from lumos.converters.chakra.dag import one_cycle
from lumos.errors import ExportError
from lumos.proto import pb

#: Processor key of a kept node that no other node shares (never pruned).
Frontier = dict[Hashable, int]


@dataclass(slots=True)
class RankGraph:
    """The nodes of one rank's file with dependencies resolved to list positions."""

    rank: int
    path: str
    nodes: list[pb.Node]
    deps: list[list[int]]

    def label(self, pos: int) -> str:
        node = self.nodes[pos]
        return f"rank {self.rank} node {node.id} {node.name!r}"


def build_rank_graph(rank: int, path: str, nodes: list[pb.Node]) -> RankGraph:
    """Index one rank's nodes; dependencies become positions in `nodes`.

    Raises ExportError naming the node if an id repeats or a dependency names an id that
    is not in the file (ASTRA-sim stops at load with "not found in index").
    """
    index: dict[int, int] = {}
    problems: list[str] = []
    for pos, node in enumerate(nodes):
        if node.id in index:
            problems.append(
                f"rank {rank} node {node.id} {node.name!r}: id used twice in {path}; "
                "give every node a unique id"
            )
        index[node.id] = pos
    deps: list[list[int]] = []
    for node in nodes:
        mine: dict[int, None] = {}  # ordered and de-duplicated in O(1) per edge (wide fan-in)
        for dep in (*node.data_deps, *node.ctrl_deps):
            at = index.get(dep)
            if at is None:
                problems.append(
                    f"rank {rank} node {node.id} {node.name!r}: depends on id {dep}, which is "
                    f"not in {path} (ASTRA-sim fails at load: 'not found in index'); "
                    "remove the dependency or add the node"
                )
            else:
                mine[at] = None
        deps.append(list(mine))
    if problems:
        raise ExportError(_join(problems))
    return RankGraph(rank, path, nodes, deps)


def topo_order(graph: RankGraph, priority: Sequence[tuple[int, int]]) -> list[int]:
    """Positions in a topological order; among ready nodes the lowest `priority` first.

    Raises ExportError naming the nodes of one cycle (ASTRA-sim would never run them).
    """
    count = len(graph.nodes)
    indegree = [len(d) for d in graph.deps]
    children: list[list[int]] = [[] for _ in range(count)]
    for pos, deps in enumerate(graph.deps):
        for dep in deps:
            children[dep].append(pos)
    heap = [(priority[p], p) for p in range(count) if indegree[p] == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        _, pos = heapq.heappop(heap)
        order.append(pos)
        for child in children[pos]:
            indegree[child] -= 1
            if indegree[child] == 0:
                heapq.heappush(heap, (priority[child], child))
    if len(order) < count:
        cycle = _one_cycle(graph, [p for p in range(count) if indegree[p] > 0])
        names = " -> ".join(graph.label(p) for p in cycle)
        raise ExportError(
            f"rank {graph.rank}: dependency cycle ({count - len(order)} nodes never become "
            f"ready; ASTRA-sim would silently skip them): {names}; remove one of these edges"
        )
    return order


def _one_cycle(graph: RankGraph, stuck: list[int]) -> list[int]:
    """One loop among the nodes that never became ready, each node followed by the one it
    depends on, closed (first node repeated)."""
    count = len(graph.nodes)
    before = np.fromiter((d for deps in graph.deps for d in deps), np.int64)
    after = np.repeat(np.arange(count), [len(d) for d in graph.deps])
    blocked = [False] * count
    for pos in stuck:
        blocked[pos] = True
    loop, _ = one_cycle(count, before, after, blocked)  # in execution order
    by_dependency = [loop[0], *reversed(loop[1:])]
    return [*by_dependency, by_dependency[0]]


def fold_dependencies(
    graph: RankGraph, order: list[int], kept: Sequence[bool], proc: Sequence[Hashable]
) -> dict[int, list[int]]:
    """New dependencies of every kept node: its nearest kept ancestors, pruned per processor.

    `proc[p]` is the serial processor of kept node p (unique for nodes no processor
    orders). Returns {kept position: kept positions it depends on}.
    """
    rank_of = [0] * len(graph.nodes)
    for i, pos in enumerate(order):
        rank_of[pos] = i
    frontier: list[Frontier | None] = [None] * len(graph.nodes)
    result: dict[int, list[int]] = {}
    for pos in order:
        merged = _merge([frontier[d] for d in graph.deps[pos]], rank_of)
        if kept[pos]:
            result[pos] = sorted(merged.values(), key=rank_of.__getitem__)
            frontier[pos] = {proc[pos]: pos}
        else:
            frontier[pos] = merged
    return result


_EMPTY: Frontier = {}


def _merge(parts: list[Frontier | None], rank_of: list[int]) -> Frontier:
    present = [p for p in parts if p]
    if not present:
        return _EMPTY
    if len(present) == 1:
        return present[0]  # shared, never mutated
    out = dict(present[0])
    for part in present[1:]:
        for key, pos in part.items():
            have = out.get(key)
            if have is None or rank_of[pos] > rank_of[have]:
                out[key] = pos
    return out


def serial_chains(
    order: list[int], proc: dict[int, Hashable], serial: set[Hashable]
) -> dict[int, int]:
    """{kept position: previous kept position on the same serial processor}, in `order`."""
    last: dict[Hashable, int] = {}
    chain: dict[int, int] = {}
    for pos in order:
        key = proc.get(pos)
        if key is None or key not in serial:
            continue
        if key in last:
            chain[pos] = last[key]
        last[key] = pos
    return chain


def _join(problems: list[str]) -> str:
    shown = "\n  ".join(problems[:20])
    more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
    return f"{len(problems)} problem(s):\n  {shown}{more}"
