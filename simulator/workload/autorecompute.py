"""`recompute="auto"`: the least activation recomputation whose memory fits the GPU.

A planner who does not know which recomputation a plan needs asks for `auto`: the plan is
sized with the estimator's own memory accounting (`step.plan_memory`: weights, gradients,
optimizer shards, the schedule's in-flight activations, workspace; milliseconds, no
simulation) under none, then selective (Megatron-Core's default `core_attn`, or the plan's
`recompute_modules`; torchtitan's "op" policy on its frameworks), then full, and the first
level that fits the GPU's HBM is the one estimated. If none fits, full is estimated and the
result says it does not fit. A level the plan cannot take (full with `a2a_overlap`, which
Megatron-Core refuses) is skipped. `AutoRecompute` records what was tried, for the text
summary and the JSON (`EstimateResult.recompute_auto`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from lumos.errors import ConfigError
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload.plan import ParallelPlan, Recompute
from lumos.simulator.workload.spec import ModelSpec

#: the levels `auto` tries, least recomputation (fastest) first
LEVELS = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)


@dataclass(frozen=True, slots=True)
class Trial:
    """One level `auto` sized: its memory per GPU (GB, busiest stage) and whether it fits."""

    recompute: Recompute
    memory_gb: float
    fits: bool


@dataclass(frozen=True, slots=True)
class AutoRecompute:
    """What `auto` chose, and the memory of every level it tried (in order)."""

    chosen: Recompute
    tried: tuple[Trial, ...]
    capacity_gb: float

    @property
    def fits(self) -> bool:
        return any(t.fits for t in self.tried)

    def text(self) -> str:
        """One line for the summary: ``auto: none 189 GB, selective 121 GB do not fit in
        80 GB`` (what the chosen level's memory is stays on the memory line)."""
        cap = f"{self.capacity_gb:.0f} GB"
        failed = [t for t in self.tried if not t.fits]
        if not failed:
            return f"auto: fits in {cap} without recomputation"
        sizes = ", ".join(f"{t.recompute.value} {t.memory_gb:.0f} GB" for t in failed)
        if not self.fits:
            return f"auto: nothing fits in {cap} ({sizes})"
        verb = "does" if len(failed) == 1 else "do"
        return f"auto: {sizes} {verb} not fit in {cap}"

    def to_json(self) -> dict[str, Any]:
        return {
            "chosen": self.chosen.value,
            "fits": self.fits,
            "capacity_gb": round(self.capacity_gb, 3),
            "tried": [
                {"recompute": t.recompute.value, "memory_gb": round(t.memory_gb, 3), "fits": t.fits}
                for t in self.tried
            ],
        }


def choose_recompute(
    model: ModelSpec, plan: ParallelPlan, km: KernelModel
) -> tuple[ParallelPlan, AutoRecompute]:
    """The plan with `auto` resolved to the least level that fits, and the record of it.

    Raises ConfigError when the plan can take no level at all (its other settings are
    wrong: the error of the last level tried).
    """
    from lumos.simulator.workload.generate import Generator
    from lumos.simulator.workload.step import plan_memory

    tried: list[Trial] = []
    last: ParallelPlan | None = None
    error: ConfigError | None = None
    capacity = 0.0
    for level in LEVELS:
        keep = plan.recompute_modules if level is Recompute.SELECTIVE else ""
        candidate = replace(plan, recompute=level, recompute_modules=keep)
        try:
            memory = plan_memory(Generator(model, candidate, km))
        except ConfigError as exc:  # a level this plan cannot take: skipped
            error = exc
            continue
        capacity, last = memory.capacity_gb, candidate
        tried.append(Trial(level, memory.total_gb, memory.fits))
        if memory.fits:
            break
    if last is None:
        assert error is not None
        raise error
    return last, AutoRecompute(last.recompute, tuple(tried), capacity)
