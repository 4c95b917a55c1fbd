"""Mixture of experts on PyTorch FSDP2 (`zero` 3 on the torchtitan / OLMo-core profiles,
`fsdp_moe`): a small MoE step's rank 0 all-gathers each block over DP and its routed
experts over expert DP, before the forward and again before the backward, reduce-scatters
both in FP32 after the backward, exchanges tokens over EP; with EP 1 the experts are the
block's; with expert DP 1 they move nothing; memory shards as stated; the rest is refused
by name."""

from __future__ import annotations

import csv
from collections import Counter
from functools import cache

import pytest

from lumos.errors import ConfigError
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.graph import COLL, RankGraph
from lumos.simulator.network.api import ALL_GATHER, ALL_TO_ALL, REDUCE_SCATTER
from lumos.simulator.workload import ParallelPlan, generate
from lumos.simulator.workload.block import DP, EDP, EP
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.spec import load_model
from lumos.simulator.workload.step import plan_memory
from tests.conftest import script_module
from tests.simulator.workload.tiny_models import small_moe

SEQ = 16
#: one MoE layer of `SMALL_MOE` outside its routed experts: q (64 x 64), k and v (64 x 32
#: each: 2 KV heads of 16), o (64 x 64), two RMSNorm weights, the router (64 x 8)
BLOCK = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 2 * 64 + 64 * 8
EXPERT = 3 * 64 * 32  # one SwiGLU expert of 32


def _plan(ep: int, dp: int = 4, **kw: object) -> ParallelPlan:
    opts: dict[str, object] = dict(
        framework="torchtitan", zero=3, grouped_gemm="fused", moe_load_factor=1.0
    )
    opts.update(kw)
    opts = {"gbs": dp, **opts}
    return ParallelPlan.build(small_moe(), mbs=1, dp=dp, seq=SEQ, ep=ep, **opts)  # type: ignore[arg-type]


@cache
def _rank0(ep: int, dp: int = 4) -> RankGraph:
    return generate(small_moe(), _plan(ep, dp), "h100").graphs[0]


def _colls(g: RankGraph, layer: int) -> Counter[tuple[str, int, int, int]]:
    """(name, collective type, group slot, bytes) of layer `layer`'s FSDP collectives."""
    out: Counter[tuple[str, int, int, int]] = Counter()
    for i in range(len(g.type)):
        name = g.names[g.name_idx[i]]
        fsdp = g.type[i] == COLL and g.comm_type[i] in (ALL_GATHER, REDUCE_SCATTER)
        if fsdp and name.startswith(f"layer{layer}.") and ".moe." not in name:
            out[name, int(g.comm_type[i]), int(g.group[i]), int(g.comm_size[i])] += 1
    return out


def test_block_over_dp_and_experts_over_expert_dp_each_layer() -> None:
    """dp 4, ep 2: expert DP 2. Per layer: block gathered twice over DP (its BF16 shard:
    a quarter), the 4 local experts twice over EDP (a half), each reduced once in FP32."""
    g = _rank0(ep=2)
    assert g.groups[DP] == (0, 1, 2, 3) and g.groups[EDP] == (0, 2) and g.groups[EP] == (0, 1)
    experts = 4 * EXPERT
    for layer in (0, 1):
        assert _colls(g, layer) == Counter(
            {
                (f"layer{layer}.param_all_gather", ALL_GATHER, DP, BLOCK * 2 // 4): 2,
                (f"layer{layer}.expert_param_all_gather", ALL_GATHER, EDP, experts * 2 // 2): 2,
                (f"layer{layer}.grad_reduce_scatter", REDUCE_SCATTER, DP, BLOCK * 4): 1,
                (f"layer{layer}.expert_grad_reduce_scatter", REDUCE_SCATTER, EDP, experts * 4): 1,
            }
        )
    a2a = (g.type == COLL) & (g.comm_type == ALL_TO_ALL)
    assert int(a2a.sum()) == 2 * 6 and set(g.group[a2a].tolist()) == {EP}


def test_ep1_keeps_the_experts_in_the_block_unit() -> None:
    """torchtitan without EP: the experts are sharded with the block, one unit over DP."""
    g = _rank0(ep=1)
    whole = BLOCK + 8 * EXPERT
    assert _colls(g, 0) == Counter(
        {
            ("layer0.param_all_gather", ALL_GATHER, DP, whole * 2 // 4): 2,
            ("layer0.grad_reduce_scatter", REDUCE_SCATTER, DP, whole * 4): 1,
        }
    )


def test_expert_dp_1_moves_no_expert_weights() -> None:
    """ep = dp: each rank holds its experts whole (AutoModel's ignored params, FSDP2 on a
    one-rank mesh): only the block is gathered and reduced."""
    names = {key[0] for key in _colls(_rank0(ep=4), 0)}
    assert names == {"layer0.param_all_gather", "layer0.grad_reduce_scatter"}


def test_memory_shards_blocks_over_dp_and_experts_over_expert_dp() -> None:
    """Weights: the block and embedding over DP 4, the experts over expert DP 2, plus two
    layers' gathered units (the one running, the one prefetched); gradients alike."""
    plan = _plan(ep=2)
    gen = Generator(small_moe(), plan, KernelModel.for_gpu(load_system("h100").gpu))
    dense = 2 * BLOCK + 2 * 256 * 64  # two blocks, embedding and output
    experts = 2 * 4 * EXPERT
    assert sum(gen.chunk_params(0)) == dense and sum(gen.expert_params(0)) == experts
    shard = dense / 4 + experts / 2
    unit = BLOCK + 4 * EXPERT
    mem = plan_memory(gen)
    assert mem.weights_gb == pytest.approx((shard * 2 + 2 * unit * 2) / 1e9)
    assert mem.gradients_gb == pytest.approx(shard * 2 / 1e9)
    assert mem.optimizer_gb == pytest.approx((dense * 12 / 4 + experts * 12 / 2) / 1e9)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"framework": "megatron"}, "modelled as PyTorch FSDP2 shards them"),
        ({"zero": 1}, "modelled with FSDP2 \\(zero 3"),
        ({"grouped_gemm": "te"}, "one grouped GEMM"),
        ({"fsdp_unit": "tensor"}, "fsdp_unit 'layer'"),
    ],
)
def test_what_fsdp2_moe_does_not_model_is_refused_by_name(
    kw: dict[str, object], match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        _plan(ep=2, **kw)


def test_mla_on_fsdp2_is_refused_by_name() -> None:
    """DeepSeek-V3 on torchtitan needs multi-head latent attention off megatron: refused."""
    with pytest.raises(ConfigError, match="multi-head latent attention"):
        ParallelPlan.build(
            load_model("deepseek-v3"),
            dp=64,
            ep=64,
            zero=3,
            framework="torchtitan",
            grouped_gemm="fused",
            gbs=64,
        )


def test_fsdp_under_pp_reduces_expert_buckets_over_expert_dp_in_fp32() -> None:
    """pp 2 (one MoE layer a stage): gathered once a step, block over DP and experts over
    expert DP; each micro-batch's gradients folded into FP32, reduced after the last."""
    plan = _plan(ep=2, pp=2, gbs=8)
    g = generate(small_moe(), plan, "h100").graphs[0]
    colls = Counter(
        (g.names[g.name_idx[i]], int(g.comm_type[i]), int(g.group[i]), int(g.comm_size[i]))
        for i in range(len(g.type))
        if g.type[i] == COLL and g.comm_type[i] in (ALL_GATHER, REDUCE_SCATTER)
    )
    experts = 4 * EXPERT
    assert colls[("expert_param_all_gather", ALL_GATHER, EDP, experts * 2 // 2)] == 1
    assert colls[("expert_grad_reduce_scatter", REDUCE_SCATTER, EDP, experts * 4)] == 1
    dense = [k for k in colls if k[0] == "grad_reduce_scatter"]
    assert [k[2] for k in dense] == [DP] and dense[0][3] == (BLOCK + 256 * 64) * 4
    accumulate = [g.names[g.name_idx[i]] for i in range(len(g.type))]
    assert accumulate.count("layer0.fsdp_grad_accumulate") == 2  # two micro-batches


def test_automodel_rows_run_fsdp2_where_the_stack_is_modelled() -> None:
    """`--moe`'s NeMo AutoModel rows: the Qwen3 row (EP stated, TE attention) on the
    `automodel` profile with FSDP2; MLA, hybrid and FlexAttention rows stay Megatron's."""
    mod = script_module("validate_published")
    rows = {r["row_id"]: r for r in csv.DictReader(mod.SETS["moe"].open())}
    qwen = mod.parse(rows["AM-Qwen3-30B-A3B"])
    assert not isinstance(qwen, str)
    assert (qwen.plan.framework, qwen.plan.zero, qwen.plan.ep, qwen.plan.expert_dp) == (
        "automodel",
        3,
        8,
        1,
    )
    for row_id in ("AM-GPT-OSS-20B", "AM-DeepSeek-V3-256", "AM2602-Nemotron-V3-Nano-30B"):
        row = mod.parse(rows[row_id])
        assert not isinstance(row, str) and (row.plan.framework, row.plan.zero) == ("megatron", 1)
