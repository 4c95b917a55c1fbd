"""How an op's time changes with its work: the ratio every re-timing edit scales by.

A traced duration is never replaced by a price from scratch; it is multiplied by
`model(new work) / model(old work)`. On a GPU trace the model is the compute cost model
(`lumos.simulator.costmodel.roofline.CostModel`, the GPU's roofline with measured
efficiency and kernel overheads). A CPU-only trace has no GPU to price, so the model is
fitted on the trace itself, as lines `time = fixed + work / throughput` (work = FLOPs for
matmul-like classes, bytes otherwise), least squares refitted once without outliers:

* per op name, when the trace ran that op at several sizes (at least `MIN_SIZES`
  distinct works spanning `MIN_SPAN`x): each op keeps its own throughput (on a CPU an
  out-of-place `sqrt` moves a byte at half the speed of an in-place `mul_`);
  a class's line counts as fitted when one of its ops has its own, or the class has one
  more distinct work than `MIN_SIZES`;
* otherwise the op is *anchored*: the line through its own median time at its median
  work with the per-call cost (`fixed`) of its class's line (matmul, attention, memory,
  reduction) when that class is fitted under the same condition, else of the
  best-determined class of its family (FLOP-bound or byte-bound). A class seen at one size per op (a trace's attention is one
  forward and one backward shape) says nothing about how time grows with work; a line
  through two different ops would read their difference as a fixed cost.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from lumos.converters.ops.cost import CostKind, OpCost
from lumos.simulator.costmodel.roofline import CostModel

_FLOP_KINDS = (CostKind.MATMUL, CostKind.ATTENTION, CostKind.CONV)
#: an op's own line needs at least this many distinct works (a class's one more) ...
MIN_SIZES = 2
#: ... spanning at least this ratio between the largest and the smallest
MIN_SPAN = 2.0


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
    """Time lines fitted on a CPU-only trace's own ops: per cost class (`lines`) and
    per op name (`ops`, fitted or anchored, see the module doc)."""

    lines: dict[CostKind, Line] = field(default_factory=dict)
    ops: dict[str, Line] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "classes": {k.value: [v.fixed_ns, v.slope_ns] for k, v in self.lines.items()},
                "ops": {k: [v.fixed_ns, v.slope_ns] for k, v in self.ops.items()},
            }
        )

    @classmethod
    def from_json(cls, text: str) -> TraceFit:
        data = json.loads(text)
        classes = data.get("classes", data) if "ops" in data else data
        return cls(
            {CostKind(k): Line(float(a), float(b)) for k, (a, b) in classes.items()},
            {k: Line(float(a), float(b)) for k, (a, b) in data.get("ops", {}).items()},
        )

    def ratio(self, old: OpCost, new: OpCost, name: str = "") -> float:
        """Time at `new` work over time at `old` work, on the op's line (else its
        class's, else the memory class's; 1.0 when there is none)."""
        line = self.ops.get(name) or self.lines.get(old.kind) or self.lines.get(CostKind.MEMORY)
        if line is None:
            return 1.0
        base = line.at(work_of(old))
        return line.at(work_of(new)) / base if base > 0 else 1.0


def _determined(work: np.ndarray, extra: int = 0) -> bool:
    sizes = np.unique(work[work > 0])
    return len(sizes) >= MIN_SIZES + extra and sizes[-1] >= MIN_SPAN * sizes[0]


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


def _anchored(pts: list[tuple[float, int]], fixed: float) -> Line:
    """The line with per-call cost `fixed` through the op's median time at its median work."""
    work = statistics.median(w for w, _ in pts)
    dur = statistics.median(d for _, d in pts)
    fixed = min(fixed, float(dur))
    return Line(fixed, (dur - fixed) / work if work > 0 else 0.0)


def fit_trace(samples: list[tuple[OpCost, int]], names: list[str] | None = None) -> TraceFit:
    """Fit the class lines and per-op lines on (cost, measured ns) samples (`names[i]`:
    the op name of sample i; without names only the class lines)."""
    by_kind: dict[CostKind, list[tuple[float, int]]] = defaultdict(list)
    by_name: dict[str, list[tuple[float, int]]] = defaultdict(list)
    kind_of: dict[str, CostKind] = {}
    for i, (cost, dur) in enumerate(samples):
        if dur > 0:
            by_kind[cost.kind].append((work_of(cost), dur))
            if names is not None:
                by_name[names[i]].append((work_of(cost), dur))
                kind_of[names[i]] = cost.kind
    fit = TraceFit()
    own = {k for k, pts in by_name.items() if _determined(np.asarray(pts, float)[:, 0])}
    determined: dict[CostKind, int] = {}
    for kind, pts in by_kind.items():
        arr = np.asarray(pts, float)
        fit.lines[kind] = _fit_line(arr[:, 0], arr[:, 1])
        if _determined(arr[:, 0], 1) or any(kind_of[k] is kind for k in own):
            determined[kind] = len(pts)
    fixed = {
        flops: max(
            (
                (n, fit.lines[k].fixed_ns)
                for k, n in determined.items()
                if (k in _FLOP_KINDS) == flops
            ),
            default=(0, 0.0),
        )[1]
        for flops in (True, False)
    }
    for name, pts in by_name.items():
        arr = np.asarray(pts, float)
        kind = kind_of[name]
        if name in own:
            line = _fit_line(arr[:, 0], arr[:, 1])
            if line.slope_ns > 0:
                fit.ops[name] = line
                continue
        base = fit.lines[kind].fixed_ns if kind in determined else fixed[kind in _FLOP_KINDS]
        fit.ops[name] = _anchored(pts, base)
    return fit


def model_ratio(model: CostModel, old: OpCost, new: OpCost) -> float:
    """GPU time ratio of the same op at new vs old work, from the cost model."""
    base = model.time_ns(old)
    return model.time_ns(new) / base if base > 0 else 1.0
