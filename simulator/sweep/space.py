"""The plan space of a sweep: the grid a user asks for, and the plans in it that are valid.

A plan is valid when its degrees multiply to the GPU count (DP is what is left), TP stays
inside one node (placement puts TP innermost), and the model and batch can take it under
the job's framework (ZeRO-3 with PP only on the FSDP2 profiles, experts only on Megatron's)
(`ParallelPlan.check`: heads and FFN divisible by TP, layers filling PP x VP chunks,
GBS a multiple of MBS x DP, sequence chunks for CP, the interleaved schedule's
micro-batch rule). Memory fit is not a validity rule: plans that do not fit are estimated
and flagged, so a planner sees how far off they are.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from itertools import product
from typing import Any

from lumos.errors import ConfigError, ResourceLimitError
from lumos.limits import MAX_RANKS, MAX_SWEEP_POINTS
from lumos.simulator.workload.fieldtypes import is_int
from lumos.simulator.workload.framework import profile
from lumos.simulator.workload.plan import ParallelPlan, Precision, Recompute
from lumos.simulator.workload.spec import ModelSpec


@dataclass(frozen=True, slots=True)
class SweepSpace:
    """What to search: the fixed job (model, GPUs, batch, sequence, hardware) and the grid."""

    model: str
    gpus: int
    gbs: int
    seq: int
    hw: str = "h100"
    tp: tuple[int, ...] = (1, 2, 4, 8)
    pp: tuple[int, ...] = (1, 2, 4, 8)
    cp: tuple[int, ...] = (1,)
    vp: tuple[int, ...] = (1,)
    mbs: tuple[int, ...] = (1, 2)
    ep: tuple[int, ...] = (1,)
    zero: tuple[int, ...] = (1,)
    recompute: tuple[str, ...] = ("none", "selective", "full")
    precision: tuple[str, ...] = ("bf16",)
    #: the job's software, fixed for the whole sweep: whose kernels run the layer
    #: (`workload.framework`) and whether TP communication overlaps the GEMMs
    framework: str = "megatron"
    tp_comm_overlap: bool = False

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}


@dataclass(slots=True)
class Enumeration:
    """The valid plans of a space, and how many grid points each rule turned away."""

    plans: list[ParallelPlan]
    grid_points: int
    rejected: Counter[str] = field(default_factory=Counter)


def plan_key(plan: ParallelPlan) -> str:
    """A stable text key of a plan (the journal and the results table use it)."""
    return (
        f"tp{plan.tp}-pp{plan.pp}-vp{plan.vp}-cp{plan.cp}-dp{plan.dp}-mbs{plan.mbs}"
        f"-z{plan.zero}-{plan.recompute.value}-{plan.precision.value}"
        + (f"-ep{plan.ep}" if plan.ep > 1 else "")
    )


def plan_label(row: dict[str, Any]) -> str:
    """A plan as a person reads it in a table: the degrees, then only what differs from
    the defaults (``TP4 PP8 VP2 DP16 MBS1 z3 full fp8``)."""
    parts = [f"TP{row['tp']}", f"PP{row['pp']}"]
    if row["vp"] > 1:
        parts.append(f"VP{row['vp']}")
    if row["cp"] > 1:
        parts.append(f"CP{row['cp']}")
    parts.append(f"DP{row['dp']}")
    if row.get("ep", 1) > 1:
        parts.append(f"EP{row['ep']}")
    parts.append(f"MBS{row['mbs']}")
    if row["zero"] != 1:
        parts.append(f"z{row['zero']}")
    if row["recompute"] != "none":
        parts.append(str(row["recompute"]))
    if row["precision"] != "bf16":
        parts.append(str(row["precision"]))
    return " ".join(parts)


def _rule(message: str) -> str:
    """The rule a ConfigError states, its numbers replaced by N (so equal rules count once)."""
    return re.sub(r"\d+", "N", message.removeprefix("plan: "))


def enumerate_plans(space: SweepSpace, model: ModelSpec, gpus_per_node: int) -> Enumeration:
    """Every valid plan of `space` for `model` on nodes of `gpus_per_node` GPUs.

    The grid is walked lazily, its size checked first. Raises ConfigError when a grid
    value is not a positive integer, a ZeRO stage or a known option; ResourceLimitError
    past `LUMOS_MAX_SWEEP_POINTS` grid points or `LUMOS_MAX_RANKS` GPUs. Repeated values
    count once.
    """
    for name in ("gpus", "gbs", "seq"):
        if not is_int(getattr(space, name)) or getattr(space, name) < 1:
            raise ConfigError(
                f"sweep: --{name} must be an integer >= 1, got {getattr(space, name)!r}"
            )
    for name in ("tp", "pp", "cp", "vp", "mbs", "ep", "zero"):
        if not all(is_int(v) for v in getattr(space, name)):
            raise ConfigError(f"sweep: --{name} needs integers, got {getattr(space, name)!r}")
    for name in ("tp", "pp", "cp", "vp", "mbs", "ep"):
        if not getattr(space, name) or min(getattr(space, name)) < 1:
            raise ConfigError(
                f"sweep: --{name} needs positive integers, got {getattr(space, name)}"
            )
    bad_zero = sorted(set(space.zero) - {0, 1, 2, 3})
    if not space.zero or bad_zero:
        raise ConfigError(f"sweep: --zero takes stages 0, 1, 2 and 3, got {bad_zero or '[]'}")
    MAX_RANKS.check(space.gpus, "sweep: --gpus")
    try:
        profile(space.framework)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("plan: ", "sweep: ", 1)) from None
    recomputes = [_option(Recompute, r, "recompute") for r in dict.fromkeys(space.recompute)]
    precisions = [_option(Precision, p, "precision") for p in dict.fromkeys(space.precision)]
    axes = [
        *(tuple(dict.fromkeys(getattr(space, a))) for a in ("tp", "pp", "cp", "vp", "mbs")),
        tuple(dict.fromkeys(space.zero)),
        tuple(dict.fromkeys(recomputes)),
        tuple(dict.fromkeys(precisions)),
        tuple(dict.fromkeys(space.ep)),
    ]
    points = math.prod(len(axis) for axis in axes)
    MAX_SWEEP_POINTS.check(points, f"sweep: grid points ({' x '.join(_sizes(axes))})")
    out = Enumeration(plans=[], grid_points=points)
    for tp, pp, cp, vp, mbs, zero, rec, prec, ep in product(*axes):  # lazily: never a list
        model_parallel = tp * pp * cp
        if space.gpus % model_parallel:
            out.rejected["tp x pp x cp does not divide the GPU count"] += 1
            continue
        if tp > gpus_per_node:
            out.rejected["tp larger than a node"] += 1
            continue
        if vp > 1 and pp == 1:
            out.rejected["virtual stages without pipeline parallelism"] += 1
            continue
        plan = ParallelPlan(
            tp=tp,
            pp=pp,
            dp=space.gpus // model_parallel,
            cp=cp,
            vp=vp,
            mbs=mbs,
            gbs=space.gbs,
            seq=space.seq,
            zero=zero,
            precision=prec,
            recompute=rec,
            ep=ep,
            framework=space.framework,
            tp_comm_overlap=space.tp_comm_overlap and tp > 1,
        )
        try:
            plan.check(model)
        except (ConfigError, ResourceLimitError) as exc:  # a plan past a limit: not fatal
            out.rejected[_rule(str(exc))] += 1
            continue
        out.plans.append(plan)
    return out


def _sizes(axes: list[tuple[Any, ...]]) -> list[str]:
    """Each axis's length, named: `tp 200`, for the message of a grid past the limit."""
    names = ("tp", "pp", "cp", "vp", "mbs", "zero", "recompute", "precision", "ep")
    return [f"{name} {len(axis)}" for name, axis in zip(names, axes, strict=True)]


def _option(enum: Any, value: str, what: str) -> Any:
    try:
        return enum(value.lower())
    except ValueError:
        choices = ", ".join(e.value for e in enum)
        raise ConfigError(f"sweep: unknown {what} {value!r} (choose from {choices})") from None
