"""Megatron-Core's cross-entropy with and without `cross_entropy_loss_fusion` (plan
`loss_fusion`), on a hand-made plan: the unfused vocab-parallel path
(megatron/core/tensor_parallel/cross_entropy.py) moves 38 bytes a logit forward (`.float()`,
max, subtract, exp, sum, divide) and 14 backward (multiply, cast), in 6 and 2 kernels."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload import ParallelPlan, estimate
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.spec import load_model

KM = KernelModel.for_gpu(load_system("h100").gpu)


def _loss_bytes(plan: ParallelPlan, forward: bool) -> tuple[int, int]:
    gen = Generator(load_model("nemotron-8b"), plan, KM)
    blk = gen.block(0, 0, forward)
    names = np.asarray(gen.names.as_list())[blk.name]
    node = "cross_entropy" if forward else "cross_entropy_bwd"
    (i,) = np.flatnonzero(names == node)
    return int(blk.cols["nbytes"][i]), gen.ctx.T * gen.ctx.vocab


def test_unfused_cross_entropy_moves_megatron_core_bytes() -> None:
    """Nemotron 8B (vocabulary 256,000), TP 2: 38 / 14 bytes a logit unfused, 14 / 6 fused;
    the step is slower by about the extra bytes over HBM."""
    fused = ParallelPlan(tp=2, mbs=1, gbs=1, seq=4096, zero=0)
    unfused = dataclasses.replace(fused, loss_fusion=False)
    for forward, (slow, fast) in ((True, (38, 14)), (False, (14, 6))):
        got, logits = _loss_bytes(unfused, forward)
        assert got == slow * logits
        got, logits = _loss_bytes(fused, forward)
        assert got == fast * logits
    a = estimate("nemotron-8b", fused).iteration_time_s
    b = estimate("nemotron-8b", unfused).iteration_time_s
    _, logits = _loss_bytes(fused, True)
    extra = KM.memory_ns((38 + 14 - 14 - 6) * logits, overhead=False) / 1e9
    assert b - a == pytest.approx(extra, rel=0.05)
