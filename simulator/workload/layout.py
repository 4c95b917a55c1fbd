"""Rank placement of a parallel plan: a rank's coordinates and its process groups.

Megatron's default order puts TP fastest (inside a node), then CP, then PP, then DP:
`rank = ((dp * pp + stage) * cp + cp_i) * tp + tp_i`. With experts (`ep` > 1) the order is
Megatron-Core's `tp-cp-ep-dp-pp` (PP outermost): `rank = ((stage * dp + dp_i) * cp + cp_i)
* tp + tp_i`, and the expert groups are carved out of a stage's tp x cp x dp ranks (see
`plan`'s module doc for the within-stage index).
"""

from __future__ import annotations

from dataclasses import dataclass

from lumos.simulator.workload.plan import ParallelPlan


@dataclass(frozen=True, slots=True)
class Coords:
    """Where one rank sits in the plan."""

    tp: int
    cp: int
    stage: int
    dp: int


class Layout:
    """Rank <-> coordinates and the process groups of a plan (global ranks, group order)."""

    def __init__(self, plan: ParallelPlan) -> None:
        self.plan = plan
        self.pp_outer = plan.ep > 1  # Megatron-Core's tp-cp-ep-dp-pp (module doc)

    def rank(self, tp: int, cp: int, stage: int, dp: int) -> int:
        p = self.plan
        if self.pp_outer:
            return ((stage * p.dp + dp) * p.cp + cp) * p.tp + tp
        return ((dp * p.pp + stage) * p.cp + cp) * p.tp + tp

    def coords(self, rank: int) -> Coords:
        p = self.plan
        tp, rest = rank % p.tp, rank // p.tp
        cp, rest = rest % p.cp, rest // p.cp
        if self.pp_outer:
            return Coords(tp, cp, rest // p.dp, rest % p.dp)
        return Coords(tp, cp, rest % p.pp, rest // p.pp)

    def _stage_rank(self, stage: int, w: int) -> int:
        """The global rank of within-stage index `w = tp_i + tp * (cp_i + cp * dp_i)`."""
        p = self.plan
        return self.rank(w % p.tp, (w // p.tp) % p.cp, stage, w // (p.tp * p.cp))

    def _expert_coords(self, c: Coords) -> tuple[int, int, int]:
        """(etp_i, ep_i, edp_i) of a rank (module doc)."""
        p = self.plan
        w = c.tp + p.tp * (c.cp + p.cp * c.dp)
        etp = p.expert_tp
        return w % etp, (w // etp) % p.ep, w // (etp * p.ep)

    def ep_group(self, c: Coords) -> tuple[int, ...]:
        """Ranks that exchange tokens (all-to-all) and share one MoE layer's experts."""
        t, _, d = self._expert_coords(c)
        etp, ep = self.plan.expert_tp, self.plan.ep
        return tuple(self._stage_rank(c.stage, t + etp * (e + ep * d)) for e in range(ep))

    def expert_dp_group(self, c: Coords) -> tuple[int, ...]:
        """Ranks holding the same expert shard: they reduce the expert gradients."""
        t, e, _ = self._expert_coords(c)
        etp, ep = self.plan.expert_tp, self.plan.ep
        edp = self.plan.expert_dp
        return tuple(self._stage_rank(c.stage, t + etp * (e + ep * d)) for d in range(edp))

    def tp_group(self, c: Coords) -> tuple[int, ...]:
        return tuple(self.rank(t, c.cp, c.stage, c.dp) for t in range(self.plan.tp))

    def cp_group(self, c: Coords) -> tuple[int, ...]:
        return tuple(self.rank(c.tp, k, c.stage, c.dp) for k in range(self.plan.cp))

    def dp_group(self, c: Coords) -> tuple[int, ...]:
        """Data-parallel replicas of this rank's shard (with CP: DP x CP share gradients)."""
        p = self.plan
        return tuple(self.rank(c.tp, k, c.stage, d) for d in range(p.dp) for k in range(p.cp))

    def embedding_group(self, c: Coords) -> tuple[int, ...]:
        """First- and last-stage ranks that hold the tied embedding."""
        return (self.rank(c.tp, c.cp, 0, c.dp), self.rank(c.tp, c.cp, self.plan.pp - 1, c.dp))
