"""Cross-rank checks of an ASTRA-sim bundle: what would hang rather than fail.

ASTRA-sim matches the k-th collective a rank issues in a communicator group with the k-th
of every other member, and a receive with a send of the same (source, destination, tag,
size); anything that does not line up waits forever with no error. Here: every group's
members issue the same collectives in the same order with the same sizes; every send has
its receive; and the whole job's graph (each rank's dependencies, plus every collective
instance joining its members, plus send → receive) has no cycle, so every node can finish.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from lumos.converters.astra_sim.graph import RankGraph
from lumos.converters.astra_sim.groups import stoi
from lumos.converters.astra_sim.nodes import SIMULATED_COLLECTIVES
from lumos.converters.chakra.attrs import get_attr
from lumos.proto import pb

#: (comm_src, comm_dst, comm_tag, comm_size) as ASTRA-sim matches point-to-point.
P2pKey = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True, order=True)
class Ref:
    """A node of the job: rank and position in that rank's node list."""

    rank: int
    pos: int


def group_of(node: pb.Node, world: int, groups: dict[int, tuple[int, ...]]) -> tuple[int, ...]:
    """Members of a collective's group as ASTRA-sim resolves `pg_name` (all ranks if none)."""
    name = str(get_attr(node, "pg_name", "") or "")
    if name in ("", "0"):
        return tuple(range(world))
    gid = stoi(name)  # as ASTRA-sim reads it: "1.0" is group 1
    return groups.get(gid, ()) if gid is not None else ()


def _describe(graph: RankGraph, pos: int) -> str:
    node = graph.nodes[pos]
    kind = pb.CollectiveCommType.Name(int(get_attr(node, "comm_type", 0)))
    return f"node {node.id} {node.name!r} ({kind}, {get_attr(node, 'comm_size')} B)"


def collective_sequences(
    graphs: Sequence[RankGraph], groups: dict[int, tuple[int, ...]]
) -> tuple[dict[tuple[int, ...], dict[int, list[int]]], list[str]]:
    """{group: {rank: positions of its simulated collectives in id order}} and mismatches."""
    world = len(graphs)
    seqs: dict[tuple[int, ...], dict[int, list[int]]] = defaultdict(dict)
    for graph in graphs:
        order = sorted(range(len(graph.nodes)), key=lambda p: graph.nodes[p].id)
        for pos in order:
            node = graph.nodes[pos]
            if node.type != pb.COMM_COLL_NODE:
                continue
            if get_attr(node, "comm_type") not in SIMULATED_COLLECTIVES:
                continue  # broadcast: ASTRA-sim only waits its duration, alone
            members = group_of(node, world, groups)
            seqs[members].setdefault(graph.rank, []).append(pos)
    problems: list[str] = []
    for members, per_rank in seqs.items():
        label = "all ranks" if len(members) == world else f"group {list(members)}"
        ref_rank = members[0]
        ref = per_rank.get(ref_rank, [])
        for rank in members[1:]:
            mine = per_rank.get(rank, [])
            problem = _compare(graphs, label, ref_rank, ref, rank, mine)
            if problem:
                problems.append(problem)
    return seqs, problems


def _signature(graph: RankGraph, pos: int) -> tuple[object, object]:
    node = graph.nodes[pos]
    return get_attr(node, "comm_type"), get_attr(node, "comm_size")


def _compare(
    graphs: Sequence[RankGraph], label: str, ra: int, a: list[int], rb: int, b: list[int]
) -> str | None:
    ga, gb = graphs[ra], graphs[rb]
    for k, (pa, pb_) in enumerate(zip(a, b, strict=False)):
        if _signature(ga, pa) != _signature(gb, pb_):
            return (
                f"{label}: collective #{k + 1} differs: rank {ra} {_describe(ga, pa)} vs rank "
                f"{rb} {_describe(gb, pb_)} (ASTRA-sim hangs); every member must issue the same "
                "collectives in the same order with the same comm_type and comm_size"
            )
    if len(a) != len(b):
        longer, graph, extra = (ra, ga, a[len(b)]) if len(a) > len(b) else (rb, gb, b[len(a)])
        return (
            f"{label}: rank {ra} issues {len(a)} collectives, rank {rb} issues {len(b)}; rank "
            f"{longer}'s {_describe(graph, extra)} has no partner (ASTRA-sim hangs); remove it "
            "or add the missing collective on the other ranks"
        )
    return None


def pair_point_to_point(graphs: Sequence[RankGraph]) -> tuple[list[tuple[Ref, Ref]], list[str]]:
    """Sends matched with receives in order per (src, dst, tag, size); problems for the rest."""
    sends: dict[P2pKey, deque[Ref]] = defaultdict(deque)
    recvs: dict[P2pKey, deque[Ref]] = defaultdict(deque)
    for graph in graphs:
        for pos in sorted(range(len(graph.nodes)), key=lambda p: graph.nodes[p].id):
            node = graph.nodes[pos]
            if node.type not in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
                continue
            key = _p2p_key(node, graph.rank)
            (sends if node.type == pb.COMM_SEND_NODE else recvs)[key].append(Ref(graph.rank, pos))
    pairs: list[tuple[Ref, Ref]] = []
    problems: list[str] = []
    for key in sorted(set(sends) | set(recvs)):
        s, r = sends.get(key, deque()), recvs.get(key, deque())
        while s and r:
            pairs.append((s.popleft(), r.popleft()))
        for ref, what, other in [(x, "send", "recv") for x in s] + [(x, "recv", "send") for x in r]:
            problems.append(_unpaired(graphs, ref, what, other, key, sends, recvs))
    return pairs, problems


def _p2p_key(node: pb.Node, rank: int) -> P2pKey:
    own = "comm_src" if node.type == pb.COMM_SEND_NODE else "comm_dst"
    src = get_attr(node, "comm_src")
    dst = get_attr(node, "comm_dst")
    src = rank if own == "comm_src" and src is None else src
    dst = rank if own == "comm_dst" and dst is None else dst
    return (
        int(src or 0),
        int(dst or 0),
        int(get_attr(node, "comm_tag") or 0),
        int(get_attr(node, "comm_size") or 0),
    )


def _unpaired(
    graphs: Sequence[RankGraph],
    ref: Ref,
    what: str,
    other: str,
    key: P2pKey,
    sends: dict[P2pKey, deque[Ref]],
    recvs: dict[P2pKey, deque[Ref]],
) -> str:
    src, dst, tag, size = key
    node = graphs[ref.rank].nodes[ref.pos]
    peer = dst if what == "send" else src
    pool = recvs if what == "send" else sends
    near = sorted({k for k in pool if k[0] == src and k[1] == dst})
    hint = (
        f"; rank {peer} has {other}s {src}->{dst} with (tag, size) "
        + ", ".join(f"({k[2]}, {k[3]})" for k in near[:5])
        if near
        else f"; rank {peer} has no {other} {src}->{dst} at all"
    )
    return (
        f"rank {ref.rank} node {node.id} {node.name!r}: {what} {src}->{dst} tag {tag} size {size} "
        f"B has no matching {other} (ASTRA-sim waits forever){hint}; make comm_src/comm_dst/"
        "comm_tag/comm_size agree"
    )


def find_hang(
    graphs: Sequence[RankGraph],
    seqs: dict[tuple[int, ...], dict[int, list[int]]],
    pairs: list[tuple[Ref, Ref]],
) -> str | None:
    """None if every node of the job can finish; else the nodes of one waiting cycle."""
    parent: dict[Ref, Ref] = {}

    def find(ref: Ref) -> Ref:
        while parent.get(ref, ref) != ref:
            ref = parent[ref]
        return ref

    for per_rank in seqs.values():
        columns = list(per_rank.items())
        depth = min(len(v) for _, v in columns)
        for k in range(depth):
            root = Ref(columns[0][0], columns[0][1][k])
            for rank, positions in columns[1:]:
                parent[Ref(rank, positions[k])] = root
    edges: dict[Ref, list[Ref]] = defaultdict(list)
    indegree: dict[Ref, int] = defaultdict(int)
    nodes: set[Ref] = set()
    for graph in graphs:
        for pos, deps in enumerate(graph.deps):
            me = find(Ref(graph.rank, pos))
            nodes.add(me)
            for dep in deps:
                _edge(edges, indegree, find(Ref(graph.rank, dep)), me)
    for send, recv in pairs:
        _edge(edges, indegree, find(send), find(recv))
    ready = deque(n for n in nodes if indegree[n] == 0)
    done = 0
    while ready:
        ref = ready.popleft()
        done += 1
        for child in edges[ref]:
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    if done == len(nodes):
        return None
    stuck = sorted(n for n in nodes if indegree[n] > 0)
    shown = ", ".join(
        f"rank {r.rank} node {graphs[r.rank].nodes[r.pos].id} {graphs[r.rank].nodes[r.pos].name!r}"
        for r in stuck[:6]
    )
    return (
        f"{len(stuck)} node(s) can never run: collectives or sends wait on each other across "
        f"ranks (ASTRA-sim hangs), e.g. {shown}; order collectives of different groups the "
        "same way on every rank"
    )


def _edge(edges: dict[Ref, list[Ref]], indegree: dict[Ref, int], a: Ref, b: Ref) -> None:
    if a != b:
        edges[a].append(b)
        indegree[b] += 1
