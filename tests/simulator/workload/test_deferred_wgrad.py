"""Megatron-Core's `defer_embedding_wgrad_compute` (plan `defer_embedding_wgrad`), on a
hand-made pipelined plan: the output layer's weight-gradient GEMMs of the first `n`
micro-batches leave the last stage's backward passes and run at the pipeline flush
(`finish_embedding_wgrad_compute`), before the gradient reductions; the output layer's
gradient bucket is reduced after them."""

from __future__ import annotations

import dataclasses

import pytest

from lumos.errors import ConfigError
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload import ParallelPlan, estimate
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.spec import load_model

KM = KernelModel.for_gpu(load_system("h100").gpu)
PLAN = ParallelPlan(tp=2, pp=2, dp=1, mbs=1, gbs=4, seq=4096, zero=1)


def _order(plan: ParallelPlan) -> list[str]:
    gen = Generator(load_model("nemotron-8b"), plan, KM)
    g, _, _, _ = gen.rank_graph(plan.pp - 1, 0)
    return [g.names[i] for i in g.name_idx]


@pytest.mark.parametrize("deferred", [2, 4])
def test_deferred_output_wgrad_runs_at_the_flush(deferred: int) -> None:
    """Nemotron 8B (vocabulary 256,000), PP 2, 4 micro-batches: the first `deferred`
    output-layer wgrads run after the last stage's last backward kernel, the rest inline."""
    names = _order(dataclasses.replace(PLAN, defer_embedding_wgrad=deferred))
    wgrads = [i for i, n in enumerate(names) if n == "output.wgrad"]
    last_bwd = max(i for i, n in enumerate(names) if n.endswith(".qkv.dgrad"))
    assert len(wgrads) == 4
    assert sum(i > last_bwd for i in wgrads) == deferred
    assert _order(PLAN).count("output.wgrad") == 4  # none deferred: all inline


def test_deferring_hides_the_output_wgrad_in_the_cool_down() -> None:
    """The last stage idles in the cool-down while stage 0 finishes its backward passes;
    the deferred GEMMs fill that idle, so the step is no slower, and faster here."""
    base = estimate("nemotron-8b", PLAN).iteration_time_s
    deferred = estimate("nemotron-8b", dataclasses.replace(PLAN, defer_embedding_wgrad=4))
    assert deferred.iteration_time_s < base


def test_deferral_plan_checks() -> None:
    model = load_model("nemotron-8b")
    with pytest.raises(ConfigError, match="defer_embedding_wgrad"):
        dataclasses.replace(PLAN, defer_embedding_wgrad=-1).check(model)


def test_output_bucket_is_reduced_after_the_deferred_wgrads() -> None:
    """With DP 2 and overlapped gradient reduction, the bucket holding the output layer's
    weight is reduce-scattered only after the flush's deferred GEMMs."""
    plan = dataclasses.replace(PLAN, dp=2, gbs=8, defer_embedding_wgrad=4)
    names = _order(plan)
    last_wgrad = max(i for i, n in enumerate(names) if n == "output.wgrad")
    reduces = [i for i, n in enumerate(names) if n == "grad_reduce_scatter"]
    assert reduces and max(reduces) > last_wgrad
    inline = _order(dataclasses.replace(plan, defer_embedding_wgrad=0))
    first_wgrad = min(i for i, n in enumerate(inline) if n == "output.wgrad")
    assert min(i for i, n in enumerate(inline) if n == "grad_reduce_scatter") > first_wgrad
