"""Which process group a collective uses, and which parallelism each group serves.

Members come from the node's `pg_ranks`, else the metadata `process_groups` entry of its
`pg_name`, else the whole job (the simulator's own rule, `lumos.simulator.load`). A
group's role is read from what travels on it and when:

* send/recv -> `pp`;
* all-reduce issued inside a layer's forward -> `tp` (Megatron's row-parallel outputs);
* all-to-all inside layers -> `cp` (context/Ulysses-style sequence exchange);
* gradient traffic in backward or optimizer (all-reduce, reduce-scatter; with all-gathers
  in forward, FSDP) -> `dp`;
* one member -> `local`; anything else -> `other`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from lumos.converters.chakra import conventions as cv
from lumos.proto import pb
from lumos.simulator.network.api import ALL_REDUCE, ALL_TO_ALL
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.etset import EtSet, RankEt, process_groups

Members = tuple[int, ...]


def members_of(n: pb.Node, groups: Mapping[str, Members], world: int) -> Members:
    """Global ranks of a collective's group (see module doc)."""
    explicit = nd.attr(n, cv.PG_RANKS)
    if isinstance(explicit, list) and explicit:
        return tuple(int(x) for x in explicit)
    label = str(nd.attr(n, "pg_name", "") or "")
    if label in groups:
        return groups[label]
    return tuple(range(world))


@dataclass(frozen=True, slots=True)
class GroupRole:
    """A group, the role recognised for it, and why."""

    members: Members
    role: str
    collectives: int
    bytes: int
    reason: str


def group_roles(ets: EtSet) -> list[GroupRole]:
    """The role of every group used on any rank (tagged input)."""
    groups, world = process_groups(ets), ets.world_size
    seen: dict[Members, list[pb.Node]] = defaultdict(list)
    for r in ets.ranks:
        for n in r.nodes:
            if n.type == pb.COMM_COLL_NODE:
                seen[members_of(n, groups, world)].append(n)
            elif n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
                src = nd.int_attr(n, "comm_src", r.rank)
                dst = nd.int_attr(n, "comm_dst", r.rank)
                seen[tuple(sorted((src, dst)))].append(n)
    out = []
    for members, nodes in sorted(seen.items()):
        role, why = _role(members, nodes)
        size = sum(nd.int_attr(n, "comm_size", 0) for n in nodes)
        out.append(GroupRole(members, role, len(nodes), size, why))
    return out


def _role(members: Members, nodes: list[pb.Node]) -> tuple[str, str]:
    if any(n.type != pb.COMM_COLL_NODE for n in nodes):
        return "pp", "send/recv between stages"
    if len(members) == 1:
        return "local", "one member"
    kinds = {(nd.tags(n)[0], nd.tags(n)[1] >= 0, nd.int_attr(n, "comm_type")) for n in nodes}
    if any(ph == "fwd" and in_layer and t == ALL_REDUCE for ph, in_layer, t in kinds):
        return "tp", "all-reduce inside a layer's forward"
    if any(in_layer and t == ALL_TO_ALL for _, in_layer, t in kinds):
        return "cp", "all-to-all inside layers"
    if any(ph in ("bwd", "optim") for ph, _, _ in kinds):
        return "dp", "gradient collectives in backward/optimizer"
    return "other", "no rule matched"


def roles_by_members(ets: EtSet) -> dict[Members, str]:
    return {g.members: g.role for g in group_roles(ets)}


def relabel(ranks: list[RankEt], mapping: Mapping[int, Members]) -> list[RankEt]:
    """Give every collective explicit `pg_ranks` and a numeric `pg_name` per distinct
    group, and write the metadata `process_groups` to match. `mapping[id(node)]` gives
    each collective's new members."""
    labels: dict[Members, str] = {}
    for r in ranks:
        for n in r.nodes:
            m = mapping.get(id(n))
            if m is not None:
                label = labels.setdefault(m, str(len(labels) + 1))  # "0" reads as "all ranks"
                nd.put(n, cv.PG_RANKS, list(m), "int64_list")
                nd.put(n, "pg_name", label, "string_val")
    text = json.dumps({v: list(k) for k, v in labels.items()}, separators=(",", ":"))
    for r in ranks:
        nd.put(r.metadata, cv.META_PROCESS_GROUPS, text, "string_val")  # type: ignore[arg-type]
    return ranks
