"""One sweep point: estimate a plan and flatten the result into a results-table row.

Runs in worker processes (local pool or Ray); takes and returns plain data only, so
it pickles cheaply and the same row comes back whichever engine ran it.
"""

from __future__ import annotations

import functools
import traceback
from typing import Any

from lumos.errors import LumosError
from lumos.hwconfigs.schema import SystemSpec
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload.plan import ParallelPlan, Precision, Recompute
from lumos.simulator.workload.spec import ModelSpec

#: result columns after the plan's own parameters, in table order
FIGURES = (
    "tokens_per_s_per_gpu",
    "iteration_time_s",
    "mfu",
    "memory_gb_per_gpu",
    "fits",
    "compute_s",
    "exposed_tp_s",
    "exposed_cp_s",
    "exposed_dp_s",
    "exposed_pp_s",
    "bubble_s",
    "exposed_ep_s",
)


def plan_from_dict(data: dict[str, Any]) -> ParallelPlan:
    """Rebuild a plan from `ParallelPlan.to_dict()` output."""
    values = dict(data)
    values["precision"] = Precision(values["precision"])
    values["recompute"] = Recompute(values["recompute"])
    return ParallelPlan(**values)


@functools.lru_cache(maxsize=8)
def _job(model: str, hw: str) -> tuple[ModelSpec, SystemSpec, KernelModel]:
    """The model, system and kernel model of a sweep, read once per worker process.

    Every point of a sweep names the same model and hardware; reading their YAML for each
    plan cost ~0.1 s, more than sizing a plan.
    """
    from lumos.hwconfigs.load import load_system
    from lumos.simulator.workload.spec import load_model

    system = load_system(hw)
    return load_model(model), system, KernelModel.for_gpu(system.gpu)


def plan_memory_gb(model: str, plan: ParallelPlan, hw: str) -> tuple[float, bool]:
    """Memory per GPU of the busiest stage and whether it fits, without simulating.

    The estimator's own accounting (`plan_memory`: weights, gradients, optimizer
    shards, the schedule's in-flight activations, workspace), which costs milliseconds
    where a simulation costs seconds.
    """
    from lumos.simulator.workload.generate import Generator
    from lumos.simulator.workload.step import plan_memory

    spec, _, km = _job(model, hw)
    memory = plan_memory(Generator(spec, plan, km))
    return memory.total_gb, memory.fits


def _resolve_auto(point: dict[str, Any], plan: ParallelPlan) -> tuple[ParallelPlan, Any]:
    """`recompute="auto"` resolved (`autorecompute.choose_recompute`) with the sweep's
    model and kernel model."""
    from lumos.simulator.workload.autorecompute import choose_recompute

    spec, _, km = _job(point["model"], point["hw"])
    return choose_recompute(spec, plan, km)


def evaluate(point: dict[str, Any]) -> dict[str, Any]:
    """Estimate `point` = {key, model, hw, gpus, plan[, simulate_infeasible]}.

    A plan that does not fit in memory is not simulated (its row has the memory figure
    and `fits` false) unless `simulate_infeasible` is set. A plan with `recompute="auto"`
    is resolved first; its row's recompute reads `auto:<chosen level>`. Every lumos error and any
    unexpected exception become an error row: one failing plan is reported in the
    table, never fatal to the sweep.
    """
    from lumos.simulator.workload.step import estimate

    row: dict[str, Any] = {"key": point["key"], **point["plan"]}
    plan = plan_from_dict(point["plan"])
    try:
        if plan.recompute is Recompute.AUTO:  # the least level that fits, sized first
            plan, auto = _resolve_auto(point, plan)
            row["recompute"] = f"auto:{auto.chosen.value}"
        if not point.get("simulate_infeasible"):
            memory_gb, fits = plan_memory_gb(point["model"], plan, point["hw"])
            if not fits:
                return {**row, "memory_gb_per_gpu": memory_gb, "fits": False}
        spec, system, km = _job(point["model"], point["hw"])
        result = estimate(spec, plan, system, gpus=point["gpus"], physics=km.physics)
    except LumosError as exc:
        return {**row, "error": str(exc)}
    except Exception as exc:  # a bug in one plan must not end the sweep
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return {**row, "error": f"internal error: {last}"}
    breakdown = result.breakdown
    row.update(
        tokens_per_s_per_gpu=result.tokens_per_s_per_gpu,
        iteration_time_s=result.iteration_time_s,
        mfu=result.mfu,
        memory_gb_per_gpu=result.memory.total_gb,
        fits=result.fits,
        compute_s=breakdown.compute_s,
        exposed_tp_s=breakdown.exposed_tp_s,
        exposed_cp_s=breakdown.exposed_cp_s,
        exposed_dp_s=breakdown.exposed_dp_s,
        exposed_pp_s=breakdown.exposed_pp_s,
        bubble_s=breakdown.bubble_s,
        exposed_ep_s=breakdown.exposed_ep_s,
    )
    return row
