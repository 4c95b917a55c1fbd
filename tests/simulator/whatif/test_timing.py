"""The CPU trace's own timing lines: per op, per class, and anchored ops seen at one size."""

from __future__ import annotations

import pytest

from lumos.converters.ops.args import DType
from lumos.converters.ops.cost import CostKind, OpCost
from lumos.simulator.whatif.timing import Line, TraceFit, fit_trace


def _cost(kind: CostKind, work: float) -> OpCost:
    flops = work if kind in (CostKind.MATMUL, CostKind.ATTENTION) else 0.0
    return OpCost(kind, flops, work if not flops else work / 10, DType.FP32)


def test_cpu_fit_keeps_each_ops_own_throughput() -> None:
    # an out-of-place sqrt moves a byte at a third of the speed of an in-place mul_:
    # both are "memory", but each keeps its own line
    samples, names = [], []
    for size in (1e3, 1e4, 1e5, 1e6):
        samples += [(_cost(CostKind.MEMORY, size), round(6_000 + 0.03 * size))]
        samples += [(_cost(CostKind.MEMORY, size), round(7_000 + 0.09 * size))]
        names += ["aten::mul_", "aten::sqrt"]
    fit = fit_trace(samples, names)
    assert fit.ops["aten::sqrt"].slope_ns == pytest.approx(0.09, rel=1e-3)
    assert fit.ops["aten::mul_"].slope_ns == pytest.approx(0.03, rel=1e-3)
    old, new = _cost(CostKind.MEMORY, 1e6), _cost(CostKind.MEMORY, 4e6)
    assert fit.ratio(old, new, "aten::sqrt") == pytest.approx((7e3 + 0.36e6) / (7e3 + 0.09e6))
    assert fit.ratio(old, new, "aten::mul_") == pytest.approx((6e3 + 0.12e6) / (6e3 + 0.03e6))


def test_op_seen_at_one_size_is_anchored_not_read_off_a_two_op_line() -> None:
    # attention traced once forward (200 us) and once backward (5x the FLOPs, 380 us):
    # a line through the two would call 155 us of it per-call cost; the GEMMs, traced at
    # several sizes, say the per-call cost is 12 us
    samples, names = [], []
    for flops in (4e6, 1e7, 2.5e7, 3.4e7):
        samples.append((_cost(CostKind.MATMUL, flops), round(12_000 + 0.0117 * flops)))
        names.append("aten::mm")
    samples += [(_cost(CostKind.ATTENTION, 4.2e6), 200_000)]
    samples += [(_cost(CostKind.ATTENTION, 2.1e7), 380_000)]
    names += ["sdpa_forward", "sdpa_backward"]
    fit = fit_trace(samples, names)
    assert fit.ops["sdpa_forward"] == Line(pytest.approx(12_000), pytest.approx(188_000 / 4.2e6))
    # four times the FLOPs (a sequence twice as long): close to four times the time
    old, new = _cost(CostKind.ATTENTION, 4.2e6), _cost(CostKind.ATTENTION, 16.8e6)
    assert fit.ratio(old, new, "sdpa_forward") == pytest.approx((12_000 + 4 * 188_000) / 200_000)
    # the class line through the two ops would have said under 1.7x
    assert fit.ratio(old, new) < 1.7


def test_fit_round_trips_through_json_and_reads_the_old_layout() -> None:
    fit = TraceFit({CostKind.MATMUL: Line(1.0, 2.0)}, {"aten::mm": Line(3.0, 4.0)})
    assert TraceFit.from_json(fit.to_json()) == fit
    old = TraceFit.from_json('{"matmul": [1.0, 2.0]}')
    assert old.lines == {CostKind.MATMUL: Line(1.0, 2.0)} and not old.ops
