"""How much more than the mean the busiest expert-parallel rank of an MoE layer receives.

Dropless routing gives each rank of the EP group the tokens its local experts were chosen
for, and the layer ends with the rank that got the most: the dispatch all-to-all finishes
when that rank has received its tokens, its grouped GEMMs run the longest, and the combine
all-to-all (which waits for every rank's experts) starts only then. lumos prices one
representative rank, so an MoE layer's expert work and all-to-all bytes are those of the
busiest rank: the mean times `load_factor`.

Under forced load balancing — what every published MoE benchmark lumos validates against
runs (Megatron-Bridge's performance summary: "we force-balance the token distribution
among experts"; NeMo AutoModel's "fake balanced gate"; the Megatron-MoE-ModelZoo scripts'
`--moe-router-force-load-balancing`) — Megatron-Core's router replaces its logits by
independent standard normal draws (`moe_utils.py`, `RandomSTE.forward`:
`logits.clone().normal_(generator=...)`), so each token's top-k is a uniformly random
k-subset of the E experts and a rank's load is a sum of independent hypergeometric draws:
with n = E / ep local experts, one token lands on X ~ Hypergeometric(E, n, k) of them
(mean k·n/E, variance k·(n/E)·(1 − n/E)·(E − k)/(E − 1)), and the rank sees the tokens of
the N = T_sp·ep·etp ranks that route to it. The ep loads sum to N·k (correlation
−1/(ep − 1) between two), so the busiest is, in expectation, the mean plus
z(ep)·√(ep/(ep − 1)) standard deviations, z(n) the expected maximum of n
standard normals (∫ x·n·φ(x)·Φ(x)^(n−1) dx, by quadrature: z(2) = 1/√π, z(8) = 1.4236,
z(32) = 2.0697; the normal approximation of the sum holds for the thousands of tokens a
micro-batch routes): `forced_load_factor`. It is small — a
few tokens in a thousand at the validated plans' batches, 1–2 % at EP 32–64 with
micro-batches of 2,048 tokens a rank — and exact for the benchmarks' routing.

A trained router does worse: the Megatron-MoE-ModelZoo's long-context table
(best_practice/Qwen3/readme.md @ c1ad0b5c) runs the same Qwen3-235B plan (TP 4, EP 8,
PP 8 x VP 4, DeepEP) with forced balancing and with its own (aux-loss) router at
295 / 237, 335 / 277, 368 / 320 and 389 / 357 TFLOP/s (16K-128K tokens, 4,096 tokens a
rank a micro-batch). No such factor is assumed here: a plan that knows its routing states
it (`ParallelPlan.moe_load_factor`, the busiest rank's load over the mean; docs/estimate.md
gives what that table implies under lumos's own model).
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

from lumos.simulator.workload.dims import Ctx


@lru_cache(maxsize=64)
def expected_max_normal(n: int) -> float:
    """Expected maximum of `n` independent standard normals (0 for one draw): the
    midpoint rule over [-10, 10] in steps of 0.005 (z(2) = 1/√π to 1e-6)."""
    if n <= 1:
        return 0.0
    unit, step = NormalDist(), 0.005
    total = 0.0
    for i in range(4000):
        x = -10.0 + (i + 0.5) * step
        total += x * n * unit.pdf(x) * unit.cdf(x) ** (n - 1)
    return total * step


def forced_load_factor(experts: int, ep: int, top_k: int, tokens: int) -> float:
    """The busiest of `ep` ranks' expected load over the mean when each of `tokens` tokens
    (all the ranks routing to one rank's experts) picks `top_k` of `experts` experts
    uniformly at random (forced load balancing; module doc)."""
    if ep <= 1 or tokens <= 0:
        return 1.0
    share = (experts // ep) / experts  # of the experts, the rank's
    mean = top_k * share
    var = top_k * share * (1.0 - share) * (experts - top_k) / max(1, experts - 1)
    cv = math.sqrt(var / tokens) / mean
    # the ranks' loads sum to tokens x top_k: correlation -1/(ep - 1) between any two, so
    # the busiest is z(ep) x sqrt(ep / (ep - 1)) standard deviations above the mean
    return 1.0 + expected_max_normal(ep) * math.sqrt(ep / (ep - 1)) * cv


def load_factor(ctx: Ctx) -> float:
    """The busiest EP rank's expert load over the mean for this plan: the plan's stated
    `moe_load_factor`, else forced balancing's (`forced_load_factor`); 1 under token
    dropping (every expert padded to its capacity: `moe_token_drop`)."""
    p, m = ctx.plan, ctx.model
    if p.moe_token_drop:
        return 1.0
    if p.moe_load_factor:
        return p.moe_load_factor
    return forced_load_factor(m.experts, p.ep, m.top_k, ctx.T_sp * p.ep * p.expert_tp)
