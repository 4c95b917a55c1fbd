"""Every rank of a generated step, from the distinct ranks: relabelled copies.

A rank that was not generated runs its representative's graph with its own process
groups (the same slots: TP, CP, DP, embedding, EP, expert DP) and its own pipeline / ring peers: a
peer of the representative at coordinates (tp 0, cp', stage', dp 0) becomes
(tp, cp', stage', dp) for rank (tp, cp, stage, dp). Arrays are shared, not copied,
except the peers.
"""

from __future__ import annotations

from dataclasses import replace

from lumos.simulator.graph import RECV, SEND, RankGraph
from lumos.simulator.workload.generate import GeneratedStep
from lumos.simulator.workload.layout import Layout
from lumos.simulator.workload.plan import ParallelPlan


def expand(step: GeneratedStep, plan: ParallelPlan) -> list[RankGraph]:
    """One graph per rank of the plan, in rank order."""
    lay = Layout(plan)
    by_rank = {g.rank: g for g in step.graphs}
    out = []
    for r in range(plan.world):
        rep = by_rank[step.rep[r]]
        if r == rep.rank:
            out.append(rep)
            continue
        c = lay.coords(r)
        p2p = (rep.type == SEND) | (rep.type == RECV)
        peer = rep.comm_peer.copy()
        q = peer[p2p] // plan.tp  # the peer's (cp, stage) position; tp and dp are ours
        cp, stage = q % plan.cp, q // plan.cp // plan.dp
        peer[p2p] = ((stage * plan.dp + c.dp) * plan.cp + cp) * plan.tp + c.tp
        g = replace(rep, rank=r, comm_peer=peer)
        g.groups = [
            lay.tp_group(c),
            lay.cp_group(c),
            lay.dp_group(c),
            lay.embedding_group(c),
            lay.ep_group(c),
            lay.expert_dp_group(c),
        ]
        out.append(g)
    return out
