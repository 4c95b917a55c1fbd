"""Workload mapping of the ASTRA-sim export: every rank's ET → the ET ASTRA-sim runs.

Per rank: keep GPU compute, collectives and send/recv; drop CPU ops, metadata and memory
nodes, re-pointing dependencies through them (`astra_graph.fold_dependencies`); serialise
each GPU stream and the rank's collectives in recorded order (ASTRA-sim runs one compute
and one communication op at a time, so this keeps its issue order equal to the trace's
and every member of a group meets its collectives in the same order); optionally turn CPU
time the GPU sat idle for into delay nodes; renumber ids in that topological order, since
ASTRA-sim issues ready nodes in ascending id.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from lumos.converters.astra_sim.cpu_gaps import idle_gaps, tail_gap
from lumos.converters.astra_sim.graph import (
    RankGraph,
    fold_dependencies,
    serial_chains,
    topo_order,
)
from lumos.converters.astra_sim.groups import GroupTable, involved_dims
from lumos.converters.astra_sim.nodes import (
    CommTarget,
    Fix,
    Kind,
    classify,
    delay_node,
    exported_node,
    start_ns,
)
from lumos.converters.chakra.attrs import get_attr
from lumos.converters.chakra.conventions import STREAM
from lumos.errors import ExportError
from lumos.proto import pb

#: how a collective whose group is the rank alone (a generated expert-data-parallel group
#: of one) is written: ASTRA-sim's rank would wait on it forever
ONE_RANK_FIX = (
    "collective of a one-rank group (nothing to exchange) exported as compute of its duration"
)

_COLLECTIVES: Hashable = ("collectives",)


class CpuGaps(enum.Enum):
    """What becomes of CPU time the GPU waited for (see docs/export.md)."""

    DELAY = "delay"  # a GPU compute node of the idle time, before the node that waited
    DROP = "drop"  # dependencies only; the GPU never waits for the CPU


@dataclass(frozen=True, slots=True)
class ExportOptions:
    """Choices of the workload mapping."""

    cpu_gaps: CpuGaps = CpuGaps.DELAY
    #: idle gaps shorter than this are not worth a node (ASTRA-sim counts in µs).
    min_gap_ns: int = 1000
    #: refuse instead of repairing (is_cpu_op on comm nodes, uint64 comm_size, ...).
    strict: bool = False
    replay_unsupported_comms: bool = False


@dataclass(slots=True)
class RankExport:
    """One rank's exported nodes and what the mapping did to get them."""

    rank: int
    source: str
    nodes: list[pb.Node]
    source_kinds: Counter[Kind] = field(default_factory=Counter)
    delays: int = 0
    delay_ns: int = 0
    fixes: list[Fix] = field(default_factory=list)


def export_rank(
    graph: RankGraph,
    groups: GroupTable,
    npus_count: Sequence[int],
    options: ExportOptions,
    carried: frozenset[int] = frozenset(),
) -> RankExport:
    """Map one rank; `carried`: ids of its sends/receives whose partner lies outside the
    window (`p2p_window`), dropped. Raises ExportError naming rank, node and fix if it
    cannot be run."""
    kinds = [Kind.CARRIED_P2P if n.id in carried else classify(n) for n in graph.nodes]
    kept = [k.kept for k in kinds]
    if not any(kept):
        counts = Counter(k.value for k in kinds)
        raise ExportError(
            f"rank {graph.rank} ({graph.path}): nothing ASTRA-sim can run ({dict(counts)}: no "
            "GPU compute, collective or send/recv); export a trace with GPU activity"
        )
    starts = [start_ns(n) for n in graph.nodes]
    order = topo_order(graph, [(s if s is not None else 0, p) for p, s in enumerate(starts)])
    proc: dict[int, Hashable] = {}
    serial: set[Hashable] = {_COLLECTIVES}
    for pos, kind in enumerate(kinds):
        stream = get_attr(graph.nodes[pos], STREAM)
        if kind is Kind.COLLECTIVE:
            proc[pos] = _COLLECTIVES
        elif kind is Kind.COMPUTE and stream is not None:
            proc[pos] = ("stream", int(stream))
            serial.add(proc[pos])
        else:
            proc[pos] = ("node", pos)
    folded = fold_dependencies(graph, order, kept, [proc.get(p) for p in range(len(kept))])
    chain = serial_chains(order, {p: proc[p] for p in folded}, serial)

    result = RankExport(graph.rank, graph.path, [], Counter(kinds))
    kept_order = [p for p in order if kept[p]]
    delays_on = options.cpu_gaps is CpuGaps.DELAY
    gaps = idle_gaps(graph, kept_order, folded, chain) if delays_on else {}
    # every node is mapped before any is linked: a refused node must not leave its
    # dependents pointing at an id that was never assigned, and every refusal is listed
    mapped: dict[int, pb.Node] = {}
    problems: list[str] = []
    for pos in kept_order:
        try:
            mapped[pos] = _exported(
                graph.rank, graph.nodes[pos], kinds[pos], groups, npus_count, options, result
            )
        except ExportError as exc:
            problems.append(str(exc))
    if problems:
        raise ExportError(f"rank {graph.rank}: " + _listed(problems))
    new_id: dict[int, int] = {}
    for pos in kept_order:
        node = mapped[pos]
        data = [new_id[d] for d in folded[pos]]
        ctrl = [new_id[chain[pos]]] if pos in chain and new_id[chain[pos]] not in data else []
        gap = gaps.get(pos, 0)
        if gap >= options.min_gap_ns:
            delay = delay_node(node, gap)
            delay.id = len(result.nodes)
            delay.data_deps.extend(data)
            delay.ctrl_deps.extend(ctrl)
            result.nodes.append(delay)
            result.delays += 1
            result.delay_ns += gap
            data, ctrl = [delay.id], []
        node.id = len(result.nodes)
        node.data_deps.extend(data)
        node.ctrl_deps.extend(ctrl)
        new_id[pos] = node.id
        result.nodes.append(node)
    tail = tail_gap(graph, kept_order) if delays_on else 0
    if tail >= options.min_gap_ns:
        _append_tail(result, tail)
    if options.strict and result.fixes:
        raise ExportError(
            "strict export refuses to repair:\n  " + "\n  ".join(str(f) for f in result.fixes)
        )
    return result


def _exported(
    rank: int,
    source: pb.Node,
    kind: Kind,
    groups: GroupTable,
    npus_count: Sequence[int],
    options: ExportOptions,
    result: RankExport,
) -> pb.Node:
    target = None
    if kind is Kind.COLLECTIVE:
        members = groups.members(rank, source)
        if members == (rank,):
            # a one-rank group exchanges nothing; ASTRA-sim never finishes such a collective
            result.fixes.append(Fix(rank, int(source.id), source.name, ONE_RANK_FIX))
            local = pb.Node()
            local.CopyFrom(source)
            local.type = pb.COMP_NODE
            return exported_node(local, Kind.COMPUTE, rank, None, result.fixes)
        target = CommTarget(groups.group_id(members), involved_dims(members, npus_count))
    return exported_node(
        source,
        kind,
        rank,
        target,
        result.fixes,
        replay_unsupported=options.replay_unsupported_comms,
    )


def _listed(problems: list[str], limit: int = 20) -> str:
    """Problems one per line, the first `limit` of them, with a count of the rest."""
    shown = "\n  ".join(problems[:limit])
    more = f"\n  ... and {len(problems) - limit} more" if len(problems) > limit else ""
    return f"{len(problems)} problem(s):\n  {shown}{more}"


def _append_tail(result: RankExport, gap_ns: int) -> None:
    """A last delay node after every sink: the CPU work that ends the step."""
    used = {d for n in result.nodes for d in (*n.data_deps, *n.ctrl_deps)}
    sinks = [n.id for n in result.nodes if n.id not in used]
    tail = delay_node(pb.Node(name="end of step"), gap_ns)
    tail.id = len(result.nodes)
    tail.data_deps.extend(sinks)
    result.nodes.append(tail)
    result.delays += 1
    result.delay_ns += gap_ns


def check_ranks(ranks: Sequence[int], npus: int) -> None:
    """ASTRA-sim opens <prefix>.0.et .. <prefix>.<N-1>.et, N from the network file."""
    if list(ranks) != list(range(len(ranks))):
        missing = sorted(set(range(max(ranks) + 1)) - set(ranks))
        raise ExportError(f"ranks must be 0..N-1 without gaps; missing rank file(s): {missing}")
    if len(ranks) != npus:
        raise ExportError(
            f"the trace has {len(ranks)} ranks but the network has {npus} NPUs "
            "(ASTRA-sim opens one file per NPU); pick a --hw config of that size"
        )
