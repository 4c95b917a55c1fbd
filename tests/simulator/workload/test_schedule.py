"""Pipeline orders: Megatron's 1F1B and interleaved 1F1B are valid schedules."""

from __future__ import annotations

import pytest

from lumos.errors import ConfigError
from lumos.simulator.workload.schedule import Step, check_order, in_flight, stage_order


@pytest.mark.parametrize(
    ("pp", "vp", "m"), [(1, 1, 4), (4, 1, 8), (4, 1, 2), (8, 3, 8), (4, 2, 12)]
)
def test_every_stage_order_is_valid(pp: int, vp: int, m: int) -> None:
    for stage in range(pp):
        order = stage_order(pp, vp, m, stage)
        assert len(order) == 2 * m * vp
        assert check_order(order, vp, m) == []


def test_1f1b_warmup_and_memory() -> None:
    order = stage_order(4, 1, 8, 0)
    assert [s.forward for s in order[:4]] == [True, True, True, True]
    assert order[4] == Step(False, 0, 0)  # first backward after pp-1 warm-up + 1 forward
    assert in_flight(order) == 4  # stage 0 holds pp micro-batches
    assert in_flight(stage_order(4, 1, 8, 3)) == 1


def test_interleaved_chunk_order() -> None:
    order = stage_order(2, 2, 4, 0)
    fwd = [(s.chunk, s.microbatch) for s in order if s.forward]
    assert fwd == [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (0, 3), (1, 2), (1, 3)]
    bwd = [(s.chunk, s.microbatch) for s in order if not s.forward]
    assert bwd[:2] == [(1, 0), (1, 1)]


def test_check_order_finds_backward_before_forward() -> None:
    bad = [Step(False, 0, 0), Step(True, 0, 0)]
    assert "before its forward" in check_order(bad, 1, 1)[0]


def test_interleaved_needs_divisible_microbatches() -> None:
    with pytest.raises(ConfigError, match="divisible by pp"):
        stage_order(4, 2, 6, 0)
