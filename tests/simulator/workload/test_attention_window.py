"""Sliding-window attention (`attention._ring_steps`): the causal band a window leaves."""

from __future__ import annotations

import dataclasses

import pytest

from lumos.simulator.workload import ParallelPlan
from lumos.simulator.workload.spec import load_model
from lumos.simulator.workload.step import estimate, model_flops_per_step


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


def test_sliding_window_mfu_counts_the_window_not_the_sequence() -> None:
    """Mistral-7B (a 4096-key window on every layer) at seq 131072 on TP 8 reported MFU
    1.42: the numerator counted every query against all 131072 keys. A window layer
    counts min(seq, window) keys; a full layer still counts seq."""
    model = load_model("mistral-7b")
    plan = ParallelPlan.build(model, tp=8, gbs=1, seq=131072, recompute="full")
    result = estimate(model, plan, "h100")
    assert 0.0 < result.mfu < 0.8
    full = dataclasses.replace(model, window=0)
    keys = {m.window: model_flops_per_step(m, plan) for m in (model, full)}
    attention = 12.0 * model.attention_width * model.layers * plan.gbs * plan.seq
    assert keys[0] - keys[4096] == pytest.approx(attention * (plan.seq - 4096))
