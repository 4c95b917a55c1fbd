"""One sweep point: estimate a plan and flatten the result into a results-table row.

Runs in worker processes (local pool or Ray); takes and returns plain data only, so
it pickles cheaply and the same row comes back whichever engine ran it.
"""

from __future__ import annotations

import traceback
from typing import Any

from lumos.errors import LumosError
from lumos.simulator.workload.plan import ParallelPlan, Precision, Recompute

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
)


def plan_from_dict(data: dict[str, Any]) -> ParallelPlan:
    """Rebuild a plan from `ParallelPlan.to_dict()` output."""
    values = dict(data)
    values["precision"] = Precision(values["precision"])
    values["recompute"] = Recompute(values["recompute"])
    return ParallelPlan(**values)


def evaluate(point: dict[str, Any]) -> dict[str, Any]:
    """Estimate `point` = {key, model, hw, gpus, plan}; a failure becomes an error row.

    Every lumos error and any unexpected exception are caught: one failing plan is
    reported in the table, never fatal to the sweep.
    """
    from lumos.simulator.workload.step import estimate

    row: dict[str, Any] = {"key": point["key"], **point["plan"]}
    try:
        result = estimate(
            point["model"], plan_from_dict(point["plan"]), point["hw"], gpus=point["gpus"]
        )
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
    )
    return row
