"""Rank placement of a parallel plan: a rank's coordinates and its process groups.

Every plan is placed in Megatron-Core's default order `tp-cp-ep-dp-pp`: TP fastest (inside
a node), then CP, then DP, with the pipeline stage outermost: `rank = ((stage * dp + dp_i)
* cp + cp_i) * tp + tp_i` (NVIDIA/Megatron-LM megatron/core/parallel_state.py @
00caa53af30912914981c86f39db123961678bbd: `initialize_model_parallel(order=
"tp-cp-ep-dp-pp")`, whose `RankGenerator` makes the first name of the order the fastest;
Megatron-LM's `--use-tp-pp-dp-mapping` switches to `tp-cp-ep-pp-dp`, off by default; the
pre-`RankGenerator` code built the same groups: each data-parallel group inside the block
of world / pp consecutive ranks of one stage). A stage's tp x cp x dp ranks are
contiguous, so a data-parallel group with tp x cp < 8 has several ranks in a node, and a
pipeline hop crosses nodes once a stage fills one. torchtitan's device mesh (`pp`,
`dp_replicate`, `dp_shard`, `cp`, `tp`) and DeepSpeed's pipeline topology (`pipe`, `data`,
`model`) also put the stage outermost. The expert groups are carved out of a stage's
tp x cp x dp ranks (see `plan`'s module doc for the within-stage index). Not modelled:
the `tp-cp-ep-pp-dp` order `--use-tp-pp-dp-mapping` selects.
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

    def rank(self, tp: int, cp: int, stage: int, dp: int) -> int:
        p = self.plan
        return ((stage * p.dp + dp) * p.cp + cp) * p.tp + tp

    def coords(self, rank: int) -> Coords:
        p = self.plan
        tp, rest = rank % p.tp, rank // p.tp
        cp, rest = rest % p.cp, rest // p.cp
        return Coords(tp, cp, rest // p.dp, rest % p.dp)

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
