"""FSDP2 inside a pipeline (`zero` 3 with `pp` > 1 on torchtitan / OLMo-core): one parameter
all-gather a step per bucket, each micro-batch's gradients folded into FP32, one FP32
reduce-scatter per bucket after the stage's last backward; torchtitan's default split of
the layers over the stages; refused where the framework is not FSDP2's."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.simulator.graph import COLL, COMP, RankGraph
from lumos.simulator.network.api import ALL_GATHER, REDUCE_SCATTER
from lumos.simulator.workload import ParallelPlan, estimate, generate
from lumos.simulator.workload.block import DP
from lumos.simulator.workload.generate import GeneratedStep
from lumos.simulator.workload.pipesplit import chunk_layers, lenient_note, torchtitan_split
from lumos.simulator.workload.spec import ModelSpec, model_from_dict
from tests.simulator.workload.tiny_models import TINY_LLAMA

MICROBATCHES = 4
MODEL: ModelSpec = model_from_dict({**TINY_LLAMA, "layers": 4, "seq": 2048}, "tiny4")


def _plan(**kw: object) -> ParallelPlan:
    opts: dict[str, object] = dict(
        framework="torchtitan", pp=2, dp=2, mbs=1, gbs=2 * MICROBATCHES, zero=3
    )
    opts.update(kw)
    return ParallelPlan.build(MODEL, **opts)  # type: ignore[arg-type]


@cache
def _step(pp: int) -> GeneratedStep:
    return generate(MODEL, _plan(pp=pp), "h100")


def _stage0(pp: int) -> RankGraph:
    return _step(pp).graphs[0]


def _names(g: RankGraph, mask: np.ndarray) -> list[str]:
    return [g.names[i] for i in g.name_idx[mask]]


def _dp(g: RankGraph, ctype: int) -> np.ndarray:
    return (g.type == COLL) & (g.group == DP) & (g.comm_type == ctype)


def test_fsdp_under_pp_gathers_once_a_step_not_per_micro_batch() -> None:
    """Unpipelined FSDP gathers every layer before each forward and each backward of each
    micro-batch; in a pipeline the stage's weights are gathered once and kept."""
    flat, piped = _stage0(1), _stage0(2)
    layers_here = 2  # stage 0 of 2 holds layers 0-1 (and the embedding)
    assert int(_dp(flat, ALL_GATHER).sum()) >= 2 * MICROBATCHES * MODEL.layers
    gathers = int(_dp(piped, ALL_GATHER).sum())
    assert 1 <= gathers <= layers_here + 1
    assert all(n == "param_all_gather" for n in _names(piped, _dp(piped, ALL_GATHER)))


def test_fsdp_under_pp_reduce_scatters_fp32_once_after_the_last_backward() -> None:
    g = _stage0(2)
    rs, ag = _dp(g, REDUCE_SCATTER), _dp(g, ALL_GATHER)
    # the gathers bring in each rank's BF16 shard (params x 2 B / dp 2); the reduce-scatters
    # take the whole FP32 gradient (torchtitan's reduce dtype, 4 B a parameter): twice as
    # many bytes x dp, once a step
    assert int(g.comm_size[rs].sum()) == 2 * 2 * int(g.comm_size[ag].sum())
    names = _names(g, np.ones(len(g.type), bool))
    last_bwd = max(i for i, n in enumerate(names) if "_bwd" in n or "dgrad" in n)
    assert int(np.flatnonzero(rs)[0]) > last_bwd, "they wait for the stage's last backward"
    copy_in = [n for n in names if n.endswith("fsdp_copy_in")]
    assert len(copy_in) == int(rs.sum())


def test_each_micro_batch_folds_its_gradients_into_fp32() -> None:
    """One accumulate a layer (and the embedding) a micro-batch, 10 B a parameter."""
    g = _stage0(2)
    names = _names(g, np.ones(len(g.type), bool))
    acc = np.array(["fsdp_grad_accumulate" in n for n in names])
    assert int(acc.sum()) == MICROBATCHES * (2 + 1)  # layers 0-1 and the embedding
    layer0 = np.flatnonzero(acc & np.array([n.startswith("layer0.") for n in names]))
    assert len(layer0) == MICROBATCHES and (g.type[layer0] == COMP).all()
    nbytes = _step(2).nbytes[g.rank][layer0]
    assert (nbytes == 10 * MODEL.layer_params()).all()


def test_fsdp_under_pp_memory_holds_unsharded_weights_and_fp32_gradients() -> None:
    """A stage's parameters P stay unsharded in BF16 (2 P), its gradients are FP32
    unsharded plus the FP32 reduced shard ((4 + 4 / dp) P), the master weights and Adam's
    moments sharded (12 P / dp): with dp 2 gradients and optimizer are each 3 x weights."""
    mem = estimate(MODEL, _plan(pp=2), "h100").memory
    assert mem is not None
    assert mem.gradients_gb == pytest.approx(3 * mem.weights_gb, rel=1e-9)
    assert mem.optimizer_gb == pytest.approx(3 * mem.weights_gb, rel=1e-9)


@pytest.mark.parametrize("framework", ["megatron", "llm-foundry"])
def test_zero3_with_pp_is_refused_outside_fsdp2_frameworks(framework: str) -> None:
    with pytest.raises(ConfigError, match="FSDP2 runs it under PyTorch's pipelining"):
        _plan(framework=framework)


def test_torchtitan_default_split_is_generate_split_points() -> None:
    """torchtitan's split with no split points: the first stage L // S, middle stages one
    more while the remainder lasts, the last the rest (Llama 3.1 405B: 126 layers)."""
    assert torchtitan_split(126, 8) == [15, *[16] * 6, 15]
    assert torchtitan_split(126, 16) == [7, *[8] * 14, 7]
    assert torchtitan_split(126, 32) == [3, *[4] * 30, 3]
    assert torchtitan_split(10, 3) == [3, 4, 3]
    assert torchtitan_split(80, 8) == [10] * 8
    titan = ParallelPlan(pp=8, framework="torchtitan-compile")
    assert chunk_layers(titan, 126) == [15, *[16] * 6, 15]
    note = lenient_note(titan, 126)
    assert note is not None and "torchtitan's default split points" in note
    assert "15, 16 x 6, 15" in note
    # Megatron's lenient even split is unchanged: first chunks one more
    assert chunk_layers(ParallelPlan(pp=8), 126) == [*[16] * 6, 15, 15]
