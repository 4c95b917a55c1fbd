"""A step's timing, simulated in full or from two short pipelines (the steady state repeats).

`simulate_step` generates the distinct ranks of a plan and simulates them: each rank's
step time and the slowest rank's breakdown (`StepTiming`). A pipeline with many
micro-batches is costly to simulate (micro-batches x chunks x layers of nodes per
stage), yet Megatron's 1F1B and interleaved 1F1B schedules are warm-up, a steady state in
which every stage repeats the same passes — one forward and one backward per micro-batch
(1F1B), the same chunk passes once per round of `pp` micro-batches (interleaved) — and
cool-down; the parameter gathers before the first forwards and the gradient reductions
after each chunk's last backward sit in the warm-up and cool-down. So once every
stage reaches the steady state, every figure of the step — each rank's time,
the compute, exposed TP / CP / DP / PP communication and bubble of a given rank — grows
by the same amount per added micro-batch (round): f(m) = f(m2) + (m - m2)·(f(m2) -
f(m1)) / (m2 - m1).

`periodic_timing` simulates the plan with m1 and m2 = m1 + 1 (1F1B) or m1 + pp
(interleaved) micro-batches (the same degrees, micro-batch and placement; a smaller
global batch) and extrapolates to the real count. m1 is the fewest micro-batches with a steady state on every stage: pp for 1F1B
(stage 0 warms up with pp - 1 forwards), 2·pp interleaved (stage 0 warms up with
2·(pp - 1) + (vp - 1)·pp of its m·vp chunk passes; with m = pp the first stage never
reaches the steady state and the breakdown, even the step time, is off by up to 3 %).
`sample_counts` takes the short path only where it is cheaper (m > m1 + m2), and with
deferred output-layer weight gradients samples no fewer micro-batches than it defers.
The error against the full simulation is held under 1 % per plan, 1F1B and interleaved,
with and without DP overlap, by tests/simulator/workload/test_periodic.py (measured:
below 1e-9 relative on every plan tried, the 70B plans of the sweep benchmark included).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields, replace
from typing import Any

from lumos.hwconfigs.schema import SystemSpec
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.network.nccl import make_pricer
from lumos.simulator.result import SimResult
from lumos.simulator.run import Mode, SimOptions, simulate
from lumos.simulator.workload.breakdown import Breakdown, breakdown
from lumos.simulator.workload.generate import GeneratedStep, Generator
from lumos.simulator.workload.plan import ParallelPlan
from lumos.simulator.workload.spec import ModelSpec
from lumos.simulator.workload.symmetry import price_keys


@dataclass(frozen=True, slots=True)
class StepTiming:
    """When a simulated step ends on each rank, and where the slowest rank's time goes."""

    per_rank_ns: dict[int, float]
    breakdown: Breakdown
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def iteration_ns(self) -> float:
        return max(self.per_rank_ns.values())


def _slowest(per_rank_ns: dict[int, float]) -> int:
    """The slowest rank; the first in rank order among equals (as the full path picks)."""
    return max(per_rank_ns, key=lambda r: per_rank_ns[r])


def _run(gen: Generator, system: SystemSpec) -> tuple[GeneratedStep, SimResult, float, float]:
    t0 = time.perf_counter()
    step = gen.step()
    t1 = time.perf_counter()
    pricer = make_pricer(system)
    # only CP ranks can be alike among the generated ones (stages differ in warm-up)
    keys = price_keys(step.graphs, pricer) if gen.plan.cp > 1 else None
    opts = SimOptions(mode=Mode.MODEL, pricer=pricer, fold=keys is not None, fold_keys=keys)
    result = simulate(step.graphs, opts)
    return step, result, t1 - t0, time.perf_counter() - t1


def _breakdown(step: GeneratedStep, result: SimResult, rank: int) -> Breakdown:
    graph = next(g for g in step.graphs if g.rank == rank)
    return breakdown(graph, result.rank(rank))


def _stats(step: GeneratedStep, result: SimResult, gen_s: float, sim_s: float) -> dict[str, Any]:
    return {
        "ranks_generated": len(step.graphs),
        "ranks_simulated": result.stats.get("ranks_simulated", len(step.graphs)),
        "nodes": sum(len(g) for g in step.graphs),
        "generate_s": round(gen_s, 3),
        "simulate_s": round(sim_s, 3),
    }


def simulate_step(gen: Generator, system: SystemSpec) -> tuple[StepTiming, GeneratedStep]:
    """The full simulation of `gen`'s plan on `system`, and the generated step."""
    step, result, gen_s, sim_s = _run(gen, system)
    per_rank = {r.rank: float(r.iteration_time_ns) for r in result.ranks}
    bd = _breakdown(step, result, _slowest(per_rank))
    return StepTiming(per_rank, bd, _stats(step, result, gen_s, sim_s)), step


def sample_counts(plan: ParallelPlan) -> tuple[int, int] | None:
    """The two micro-batch counts to simulate for `plan`, or None to simulate it in full.

    With deferred output-layer weight gradients (`defer_embedding_wgrad`: the first that
    many micro-batches' GEMMs run at the flush) both samples defer as many as the real
    step, so m1 is at least that count (a multiple of pp when interleaved): the flush is
    then the same in both and the step still grows by one round's passes. None when the
    real count is no larger than the two samples together (no saving).
    """
    deferred = plan.defer_embedding_wgrad
    if plan.vp == 1:
        m1 = max(plan.pp, deferred)
        m2 = m1 + 1
    else:
        m1 = max(2 * plan.pp, -(-deferred // plan.pp) * plan.pp)
        m2 = m1 + plan.pp
    return (m1, m2) if plan.microbatches > m1 + m2 else None


def with_microbatches(plan: ParallelPlan, m: int) -> ParallelPlan:
    """`plan` with `m` micro-batches per step (the global batch shrunk to match)."""
    return replace(plan, gbs=m * plan.mbs * plan.dp)


def periodic_timing(
    model: ModelSpec, plan: ParallelPlan, km: KernelModel, system: SystemSpec
) -> StepTiming:
    """`plan`'s timing extrapolated from two short pipelines (see module doc).

    Raises ConfigError when `plan` has too few micro-batches to sample (`sample_counts`).
    """
    from lumos.errors import ConfigError

    counts = sample_counts(plan)
    if counts is None:
        raise ConfigError(
            f"plan: {plan.microbatches} micro-batches are too few to extrapolate; simulate "
            "the full step"
        )
    runs = [_run(Generator(model, with_microbatches(plan, m), km), system) for m in counts]
    scale = (plan.microbatches - counts[1]) / (counts[1] - counts[0])

    def extend(a: float, b: float) -> float:
        return b + (b - a) * scale

    ends = [{r.rank: float(r.iteration_time_ns) for r in res.ranks} for _, res, _, _ in runs]
    per_rank = {r: extend(ends[0][r], ends[1][r]) for r in ends[1]}
    slowest = _slowest(per_rank)
    b1, b2 = (_breakdown(step, res, slowest) for step, res, _, _ in runs)
    values = {
        f.name: extend(getattr(b1, f.name), getattr(b2, f.name))
        for f in fields(Breakdown)
        if f.name != "rank"
    }
    stats = _stats(runs[1][0], runs[1][1], runs[0][2] + runs[1][2], runs[0][3] + runs[1][3])
    stats["nodes"] += sum(len(g) for g in runs[0][0].graphs)
    stats["microbatches_simulated"] = list(counts)
    return StepTiming(per_rank, Breakdown(rank=slowest, **values), stats)
