"""How an op's time changes with its work: the ratio every re-timing edit scales by.

A traced duration is never replaced by a price from scratch; it is multiplied by
`model(new work) / model(old work)`. On a GPU trace the model is the compute cost model
(`lumos.simulator.costmodel.roofline.CostModel`, the GPU's roofline with measured
efficiency and kernel overheads). A CPU-only trace has no GPU to price, so the model is
fitted on the trace itself: per cost class (matmul, attention, memory, reduction),
`time = fixed + work / throughput` by least squares over that class's ops (work = FLOPs
for matmul-like classes, bytes otherwise), refitted once without the outliers.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from lumos.converters.ops.cost import CostKind, OpCost
from lumos.simulator.costmodel.roofline import CostModel

_FLOP_KINDS = (CostKind.MATMUL, CostKind.ATTENTION, CostKind.CONV)


def work_of(cost: OpCost) -> float:
    return cost.flops if cost.kind in _FLOP_KINDS else cost.bytes


@dataclass(frozen=True, slots=True)
class Line:
    """`fixed_ns + slope_ns * work`."""

    fixed_ns: float
    slope_ns: float

    def at(self, work: float) -> float:
        return self.fixed_ns + self.slope_ns * work


@dataclass(slots=True)
class TraceFit:
    """Per-class time lines fitted on a trace's own ops (CPU-only traces)."""

    lines: dict[CostKind, Line] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({k.value: [v.fixed_ns, v.slope_ns] for k, v in self.lines.items()})

    @classmethod
    def from_json(cls, text: str) -> TraceFit:
        return cls(
            {CostKind(k): Line(float(a), float(b)) for k, (a, b) in json.loads(text).items()}
        )

    def ratio(self, old: OpCost, new: OpCost) -> float:
        line = self.lines.get(old.kind) or self.lines.get(CostKind.MEMORY)
        if line is None:
            return 1.0
        base = line.at(work_of(old))
        return line.at(work_of(new)) / base if base > 0 else 1.0


def _fit_line(work: np.ndarray, dur: np.ndarray) -> Line:
    if len(work) < 2 or np.ptp(work) <= 0:
        return Line(float(np.median(dur)), 0.0)
    keep = np.ones(len(work), bool)
    fixed = slope = 0.0
    for _ in range(2):
        a = np.vstack([np.ones(keep.sum()), work[keep]]).T
        (fixed, slope), *_ = np.linalg.lstsq(a, dur[keep], rcond=None)
        resid = dur - (fixed + slope * work)
        mad = float(np.median(np.abs(resid))) or 1.0
        keep = np.abs(resid) <= 4 * mad
        if keep.sum() < 2:
            break
    slope = max(float(slope), 0.0)
    fixed = max(float(fixed), 0.0)
    return Line(fixed, slope)


def fit_trace(samples: list[tuple[OpCost, int]]) -> TraceFit:
    """Fit each class's line on (cost, measured ns) samples."""
    by_kind: dict[CostKind, list[tuple[float, int]]] = defaultdict(list)
    for cost, dur in samples:
        if dur > 0:
            by_kind[cost.kind].append((work_of(cost), dur))
    fit = TraceFit()
    for kind, pts in by_kind.items():
        arr = np.asarray(pts, float)
        fit.lines[kind] = _fit_line(arr[:, 0], arr[:, 1])
    return fit


def model_ratio(model: CostModel, old: OpCost, new: OpCost) -> float:
    """GPU time ratio of the same op at new vs old work, from the cost model."""
    base = model.time_ns(old)
    return model.time_ns(new) / base if base > 0 else 1.0
