"""Matching communication across ranks, once, before simulating: collectives and send/recv.

A collective instance is the k-th collective that each member rank issues in one process
group (ordered by `comm_seq` when every node has it, else by node id); it starts when every
simulated member has arrived. The k-th send (src→dst, tag) pairs with the k-th receive
(src→dst, tag). Mismatches — different lengths, types or sizes across members, a send
with no receive on a loaded peer — are collected as problems naming rank, node id and
name, so they are reported at load and never show up as a hang.

`rep` maps every loaded rank to the rank that stands for it (itself, unless folded); a
peer or member that is loaded but not simulated is represented by its `rep`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lumos.simulator.distinct import distinct
from lumos.simulator.graph import COLL, RECV, SEND, RankGraph


@dataclass(slots=True)
class Instance:
    """One joint communication event: member nodes as (slot, node index) pairs.

    `kind` is "coll" or "p2p" (then `members` = [send, recv]); `group` the collective's
    global ranks in order (p2p: (src, dst)).
    """

    kind: str
    comm_type: int
    size: int
    group: tuple[int, ...]
    members: list[tuple[int, int]] = field(default_factory=list)


def _order(g: RankGraph, nodes: np.ndarray) -> list[int]:
    seq = g.comm_seq[nodes]
    if len(nodes) and (seq >= 0).all():
        return nodes[np.argsort(seq, kind="stable")].tolist()
    return nodes.tolist()


def match_collectives(
    graphs: Sequence[RankGraph], problems: list[str], only_types: Sequence[int] | None = None
) -> list[Instance]:
    """Collective instances over the simulated `graphs` (slots = positions in the list);
    only collectives of `only_types` when given (the others run alone)."""
    slot_of = {g.rank: k for k, g in enumerate(graphs)}
    seqs: dict[tuple[int, ...], dict[int, list[int]]] = {}
    for k, g in enumerate(graphs):
        colls = np.nonzero(g.type == COLL)[0]
        if only_types is not None:
            colls = colls[np.isin(g.comm_type[colls], only_types)]
        by_group: dict[int, list[int]] = {}
        for gid in distinct(g.group[colls]).tolist():
            by_group[gid] = _order(g, colls[g.group[colls] == gid])
        for gid, ordered in by_group.items():
            members = g.groups[gid]
            if g.rank not in members:
                problems.append(
                    f"{g.where(ordered[0])}: collective's group {list(members)} "
                    f"does not include rank {g.rank}"
                )
                continue
            seqs.setdefault(members, {})[k] = ordered
    instances: list[Instance] = []
    for members, per_slot in sorted(seqs.items()):
        slots = sorted({slot_of[r] for r in members if r in slot_of})
        lengths = {k: len(per_slot.get(k, ())) for k in slots}
        if len(set(lengths.values())) > 1:
            problems.append(_length_problem(graphs, members, per_slot, lengths))
            continue
        if not slots or not lengths[slots[0]]:
            continue
        cols = [per_slot[k] for k in slots]
        types = [graphs[k].comm_type[per_slot[k]] for k in slots]
        sizes = [graphs[k].comm_size[per_slot[k]] for k in slots]
        for j in range(1, len(slots)):
            for idx in np.nonzero((types[j] != types[0]) | (sizes[j] != sizes[0]))[0].tolist():
                k0, k = slots[0], slots[j]
                problems.append(
                    f"collective #{idx} of group {list(members)} differs: "
                    f"{graphs[k0].where(cols[0][idx])} is (type {int(types[0][idx])}, "
                    f"{int(sizes[0][idx])} B) but {graphs[k].where(cols[j][idx])} is "
                    f"(type {int(types[j][idx])}, {int(sizes[j][idx])} B)"
                )
        for idx, (ctype, size) in enumerate(zip(types[0].tolist(), sizes[0].tolist(), strict=True)):
            nodes = [(k, col[idx]) for k, col in zip(slots, cols, strict=True)]
            instances.append(Instance("coll", ctype, size, members, nodes))
    return instances


def _length_problem(
    graphs: Sequence[RankGraph],
    members: tuple[int, ...],
    per_slot: dict[int, list[int]],
    lengths: dict[int, int],
) -> str:
    shortest = min(lengths.values())
    parts = []
    for k, count in lengths.items():
        nodes = per_slot.get(k, [])
        extra = f", first unmatched {graphs[k].where(nodes[shortest])}" if count > shortest else ""
        parts.append(f"rank {graphs[k].rank}: {count}{extra}")
    return f"group {list(members)} issues different numbers of collectives: " + "; ".join(parts)


def match_p2p(
    graphs: Sequence[RankGraph], rep: Mapping[int, int], problems: list[str]
) -> list[Instance]:
    """Send/recv pairs over the simulated `graphs`; peers outside `rep` stay unpaired."""
    sends: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    recvs: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    for k, g in enumerate(graphs):
        for i in np.nonzero((g.type == SEND) | (g.type == RECV))[0].tolist():
            peer = int(g.comm_peer[i])
            is_send = g.type[i] == SEND
            if peer < 0:
                side = "comm_dst" if is_send else "comm_src"
                problems.append(f"{g.where(i)}: point-to-point node without {side}")
                continue
            if peer not in rep:
                continue
            tag = int(g.comm_tag[i])
            if is_send:
                sends.setdefault((g.rank, rep[peer], tag), []).append((k, i))
            else:
                recvs.setdefault((rep[peer], g.rank, tag), []).append((k, i))
    instances = []
    for key in sorted(set(sends) | set(recvs)):
        s_list, r_list = sends.get(key, []), recvs.get(key, [])
        for s, r in zip(s_list, r_list, strict=False):
            gs, gr = graphs[s[0]], graphs[r[0]]
            size_s, size_r = int(gs.comm_size[s[1]]), int(gr.comm_size[r[1]])
            if size_s != size_r:
                problems.append(
                    f"{gs.where(s[1])} sends {size_s} B but its receive {gr.where(r[1])} "
                    f"expects {size_r} B"
                )
            # priced between the sender and its real peer: under folding the receive may
            # belong to the peer's representative (a CP ring folds onto one rank)
            pair = (key[0], int(gs.comm_peer[s[1]]))
            instances.append(Instance("p2p", -1, size_s, pair, [s, r]))
        for k, i in s_list[len(r_list) :] + r_list[len(s_list) :]:
            problems.append(
                f"{graphs[k].where(i)}: no matching "
                f"{'receive' if graphs[k].type[i] == SEND else 'send'} "
                f"(src {key[0]}, dst {key[1]}, tag {key[2]})"
            )
    return instances


def outside_notes(graphs: Sequence[RankGraph]) -> list[str]:
    """What simulating only `graphs` (an explicit subset of a job) does to communication.

    The rule (docs/simulate.md): a collective whose group has members outside the subset
    starts when its members inside have arrived and is priced over its whole group; a
    send or receive whose peer is outside runs unpaired (its recorded time in replay,
    priced in model mode). Returns one note with the counts, or none.
    """
    loaded = {g.rank for g in graphs}
    colls = p2p = 0
    for g in graphs:
        for i in np.nonzero(g.type == COLL)[0].tolist():
            colls += not loaded.issuperset(g.groups[int(g.group[i])])
        for i in np.nonzero((g.type == SEND) | (g.type == RECV))[0].tolist():
            p2p += int(g.comm_peer[i]) not in loaded
    if not colls and not p2p:
        return []
    return [
        f"simulated ranks {', '.join(map(str, sorted(loaded)))} only: {colls} collective "
        "node(s) have members outside them (each starts when its members here arrive, "
        f"priced over its whole group), {p2p} send/recv node(s) have their peer outside "
        "(run unpaired)"
    ]
