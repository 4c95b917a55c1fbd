"""Sliding-window attention (`attention._ring_steps`): the causal band a window leaves."""

from __future__ import annotations

import dataclasses

import pytest

from lumos.simulator.workload import ParallelPlan
from lumos.simulator.workload.spec import load_model
from lumos.simulator.workload.step import estimate


def test_sliding_window_band_never_costs_more_than_causal_attention() -> None:
    """A window was priced as `window` keys for every query, so past half the sequence it
    cost more than no window at all (Mistral-7B's shape at seq 4096: window 4000 priced
    0.436 s a step against 0.393 s without); query i sees min(i + 1, window) keys, so the
    cost falls with the window and meets causal attention at window = seq."""
    model = load_model("mistral-7b")
    plan = ParallelPlan.build(model, dp=8, gbs=8, seq=4096)
    times = [
        estimate(dataclasses.replace(model, window=w), plan, "h100").iteration_time_s
        for w in (128, 2048, 3000, 4000, 0)
    ]
    assert times == sorted(times) and times[0] < 0.95 * times[-1]
    assert times[-2] == pytest.approx(times[-1], rel=1e-3)  # window 4000 of 4096: causal
