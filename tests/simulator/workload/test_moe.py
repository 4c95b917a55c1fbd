"""Mixture-of-experts estimates: a small MoE model's generated ranks hold exactly the
expected kernels and all-to-alls (bytes, EP group members), EP 1 has no all-to-all,
plans that cannot shard the experts are refused, memory matches a hand count, HF aliases
parse, unmodelled architectures are refused by name, and the published MoE rows parse."""

from __future__ import annotations

import csv
from collections import Counter

import pytest

from lumos.errors import ConfigError
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.graph import COLL, COMP
from lumos.simulator.network.api import ALL_TO_ALL, REDUCE_SCATTER
from lumos.simulator.rendezvous import match_collectives, match_p2p
from lumos.simulator.workload import ParallelPlan, estimate, generate
from lumos.simulator.workload.block import EDP, EP, EP_STREAM
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.ranks import expand
from lumos.simulator.workload.spec import ModelSpec, load_model, model_from_dict
from lumos.simulator.workload.step import plan_memory
from tests.conftest import script_module
from tests.simulator.workload.tiny_models import SMALL_MOE

SMALL = SMALL_MOE
SEQ = 16
ROUTED_BYTES = SEQ * 2 * 64 * 2  # tokens x top_k x hidden x BF16: one rank's all-to-all


def _model() -> ModelSpec:
    return model_from_dict(dict(SMALL), "small", "small-moe")


def _plan(ep: int, dp: int = 4, **kw: object) -> ParallelPlan:
    """A plan at the mean expert load (`moe_load_factor` 1: the hand counts' balance)."""
    kw = {"moe_load_factor": 1.0, **kw}
    return ParallelPlan.build(_model(), mbs=1, dp=dp, gbs=dp, seq=SEQ, ep=ep, **kw)  # type: ignore[arg-type]


def test_spec_from_hf_names_counts_active_parameters() -> None:
    m = _model()
    assert (m.experts, m.top_k, m.moe_ffn, m.moe_layers) == (8, 2, 32, 2)
    expert = 64 * 32 * 3  # gate, up, down
    dense = 64 * (4 + 2 * 2) * 16 + 4 * 16 * 64 + 2 * 64 + 64 * 8  # qkv, proj, norms, router
    emb = 2 * 256 * 64
    assert m.params() == 2 * (dense + 8 * expert) + emb + 64
    assert m.params(active=True) == 2 * (dense + 2 * expert) + emb + 64


def test_unmodelled_architectures_are_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"mlp_only_layers.*irregular"):
        model_from_dict({**SMALL, "mlp_only_layers": [1]}, "qwen")
    with pytest.raises(ConfigError, match="top_k"):
        model_from_dict({k: v for k, v in SMALL.items() if k != "num_experts_per_tok"}, "x")
    with pytest.raises(ConfigError, match="needs experts"):
        model_from_dict({"layers": 1, "hidden": 8, "heads": 1, "vocab": 8, "top_k": 2}, "x")


def test_moe_layer_ops_and_all_to_alls_exact() -> None:
    step = generate(_model(), _plan(ep=4), "h100")
    (g,) = step.graphs
    names = [g.names[i] for i in g.name_idx]
    layer0 = Counter(n.split(".", 1)[1] for n in names if n.startswith("layer0.moe"))
    fwd = ["router", "topk", "tokens_per_expert", "counts_all_gather", "splits", "sync"]
    fwd += ["permute", "sort", "fc1", "activation", "fc2", "unsort", "unpermute"]
    fwd += ["dispatch_probs"]  # sort / unsort: 2 local experts; counts, sync: test_moe_meta
    bwd = ["unpermute_bwd", "unsort_bwd", "fc2.dgrad", "fc2.wgrad", "activation_bwd"]
    bwd += ["fc1.dgrad", "fc1.wgrad", "sort_bwd", "permute_bwd", "topk_bwd"]
    bwd += ["router.dgrad", "router.wgrad", "dispatch_probs_bwd"]
    a2a = ["dispatch", "combine", "combine_bwd", "dispatch_bwd"]
    fwd += ["host_issue", "host_issue_post", "host_issue_bwd"]  # the host thread: moe_host
    assert layer0 == Counter(f"moe.{n}" for n in fwd + bwd + a2a)
    colls = (g.type == COLL) & (g.comm_type == ALL_TO_ALL)
    # two MoE layers x (dispatch, combine, the dispatch's probabilities) x (fwd, bwd)
    assert int(colls.sum()) == 2 * 6
    assert set(g.comm_size[colls].tolist()) == {ROUTED_BYTES, SEQ * 2 * 4}
    assert set(g.group[colls].tolist()) == {EP} and set(g.stream[colls].tolist()) == {EP_STREAM}
    assert g.groups[EP] == (0, 1, 2, 3) and g.groups[EDP] == (0,)


def test_ep_groups_are_carved_from_data_parallel_ranks() -> None:
    plan = _plan(ep=2, dp=4, tp=2, etp=1)
    gen = Generator(_model(), plan, KernelModel.for_gpu(load_system("h100").gpu))
    g, *_ = gen.rank_graph(0, 0)
    assert g.groups[EP] == (0, 1)  # etp 1: the EP group spans the TP pair
    assert g.groups[EDP] == (0, 2, 4, 6)
    expert_rs = (g.group == EDP) & (g.comm_type == REDUCE_SCATTER)
    assert int(expert_rs.sum()) >= 1  # expert gradients reduced over expert DP


def test_ep1_has_no_all_to_all_and_local_experts_take_all_tokens() -> None:
    (g,) = generate(_model(), _plan(ep=1), "h100").graphs
    assert int(((g.type == COLL) & (g.comm_type == ALL_TO_ALL)).sum()) == 0
    assert int((g.type == COMP).sum()) > 0


@pytest.mark.parametrize(
    ("ep", "dp", "match"),
    [(3, 3, "divide the 8 experts"), (4, 2, "must divide a stage's")],
)
def test_plans_that_cannot_shard_the_experts_are_refused(ep: int, dp: int, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        _plan(ep=ep, dp=dp)


def test_ep_on_a_dense_model_is_refused() -> None:
    with pytest.raises(ConfigError, match="mixture-of-experts"):
        ParallelPlan.build(load_model("llama3-8b"), dp=2, ep=2)


def test_memory_of_expert_shards_by_hand() -> None:
    plan = _plan(ep=2, dp=4, zero=1)
    gen = Generator(_model(), plan, KernelModel.for_gpu(load_system("h100").gpu))
    experts = 2 * (8 // 2) * 64 * 32 * 3  # two layers x 4 local experts
    dense = 2 * (64 * 8 * 16 + 64 * 64 + 2 * 64 + 64 * 8) + 2 * 256 * 64
    assert sum(gen.expert_params(0)) == experts and sum(gen.chunk_params(0)) == dense
    mem = plan_memory(gen)
    assert mem.weights_gb == pytest.approx((dense + experts) * 2 / 1e9)
    assert mem.optimizer_gb == pytest.approx((dense * 12 / 4 + experts * 12 / 2) / 1e9)


def test_estimate_runs_and_counts_active_flops() -> None:
    res = estimate(_model(), _plan(ep=4), "h100")
    assert res.iteration_time_s > 0 and res.breakdown.exposed_ep_s > 0
    assert 0 < res.mfu < 1


def test_published_moe_rows_parse() -> None:
    mod = script_module("validate_published")
    rows = [r for r in csv.DictReader(mod.HELDOUT.open()) if r["arch"] == "MoE"]
    assert len(rows) == 6
    parsed = {r["row_id"]: mod.parse(r) for r in rows}
    oss = parsed["MB2511-GPTOSS-120B"]
    assert not isinstance(oss, str)
    assert oss.model.name == "gpt-oss-120b" and (oss.plan.ep, oss.plan.pp, oss.plan.dp) == (
        8,
        4,
        16,
    )
    big = parsed["MB2602-Qwen3-235B-A22B"]
    assert not isinstance(big, str) and (big.plan.ep, big.plan.expert_tp, big.plan.tp) == (32, 1, 2)


def test_every_rank_of_a_pipelined_moe_plan_matches_up() -> None:
    """Megatron-Core placement (PP outermost): expanded to all 16 ranks, every collective
    (EP all-to-alls, expert-DP reductions) and send/recv pairs up, each EP group in one
    stage's 8 ranks (one node)."""
    model = model_from_dict({**SMALL, "layers": 4}, "small", "small-moe")
    plan = ParallelPlan.build(model, pp=2, dp=8, ep=4, mbs=1, gbs=16, seq=SEQ)
    graphs = expand(generate(model, plan, "h100"), plan)
    problems: list[str] = []
    colls = match_collectives(graphs, problems)
    match_p2p(graphs, {g.rank: g.rank for g in graphs}, problems)
    assert problems == []
    a2a = [inst for inst in colls if len(inst.members) == 4 and inst.group[-1] - inst.group[0] == 3]
    assert a2a and all(max(i.group) // 8 == min(i.group) // 8 for i in a2a)
    assert graphs[9].groups[EP] == (8, 9, 10, 11) and graphs[9].groups[EDP] == (9, 13)


def test_expert_tp_gathers_and_scatters_the_dispatched_rows_over_tp() -> None:
    """etp = tp = 2 (Megatron-Core's default): each TP rank routes its SP shard (T/2
    tokens), the EP all-to-all moves them, an all-gather over TP brings both shards to the
    experts (split in two), a reduce-scatter over TP returns the partial sums."""
    (g,) = generate(_model(), _plan(ep=2, dp=2, tp=2), "h100").graphs
    names = [g.names[i] for i in g.name_idx]
    routed = SEQ // 2 * 2 * 64 * 2  # T_sp x top_k x hidden x BF16

    def size(name: str) -> set[int]:
        return {int(g.comm_size[i]) for i, n in enumerate(names) if n == f"layer0.moe.{name}"}

    assert size("dispatch") == size("combine") == {routed}
    assert size("dispatch_all_gather") == size("combine_bwd_all_gather") == {routed}
    assert size("combine_reduce_scatter") == size("dispatch_bwd_reduce_scatter") == {2 * routed}
    fc1 = next(i for i, n in enumerate(names) if n == "layer0.moe.fc1")
    assert int(g.type[fc1]) == COMP


def test_sliding_window_layers_attend_over_the_window_only() -> None:
    """GPT-OSS: even layers attend over a 128-key band, odd layers causally over all."""
    spec = load_model("gpt-oss-120b")
    assert spec.is_window_layer(0) and not spec.is_window_layer(1)
    plan = ParallelPlan.build(spec, pp=4, dp=8, ep=8, mbs=1, gbs=8, seq=4096)
    gen = Generator(spec, plan, KernelModel.for_gpu(load_system("h100").gpu))
    blk = gen.block(0, 0, True)
    names = gen.names.as_list()
    dur = {names[blk.name[i]]: int(blk.cols["dur"][i]) for i in range(len(blk))}
    assert dur["layer0.attention"] * 4 < dur["layer1.attention"]


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [  # the model cards' counts (Llama 4 Scout's 109B includes its vision encoder)
        ("mixtral-8x7b", 46.7, 12.9),
        ("mixtral-8x22b", 141.0, 39.0),
        ("qwen3-30b-a3b", 30.5, 3.3),
        ("qwen3-235b-a22b", 235.0, 22.0),
        ("gpt-oss-120b", 116.8, None),  # 5.1B active counts no embeddings
        ("gpt-oss-20b", 20.9, None),  # the card's 20.91B total
        ("llama4-scout", 109.0, 17.0),
        ("llama4-maverick", 400.0, 17.0),
    ],
)
def test_builtin_moe_parameter_counts(name: str, total_b: float, active_b: float | None) -> None:
    spec = load_model(name)
    assert spec.params() / 1e9 == pytest.approx(total_b, rel=0.02)
    if active_b is not None:
        assert spec.params(active=True) / 1e9 == pytest.approx(active_b, rel=0.03)


def test_moe_layer_pattern() -> None:
    maverick = load_model("llama4-maverick")
    assert [maverick.is_moe_layer(i) for i in range(4)] == [False, True, False, True]
    dsv3_like = model_from_dict({**SMALL, "layers": 5, "first_k_dense_replace": 3}, "x")
    assert [dsv3_like.is_moe_layer(i) for i in range(5)] == [False, False, False, True, True]


def test_an_unseen_moe_row_maps_by_name_or_says_why() -> None:
    """A published MoE row with the held-out file's layout (shape columns empty): a NeMo
    Mixtral row takes the built-in by normalised name and Megatron-Core's default expert TP
    (= TP); a model lumos has no shape for is refused with the reason."""
    mod = script_module("validate_published")
    base = next(r for r in csv.DictReader(mod.HELDOUT.open()) if r["arch"] == "MoE")
    row = {**base, "row_id": "X-MIXTRAL", "model": "Mixtral 8x7B", "framework": "NeMo 24.07"}
    row |= {"tp": "2", "pp": "4", "dp": "8", "ep": "8", "vp": "", "sp": "yes", "mbs": "1"}
    row |= {"gbs_seqs": "256", "precision": "FP8", "gpus": "64", "tokens_per_s_per_gpu": "4000"}
    parsed = mod.parse(row)
    assert not isinstance(parsed, str)
    assert parsed.model.name == "mixtral-8x7b" and parsed.plan.expert_tp == 2
    refused = mod.parse({**row, "model": "Qwen3-Next 80B-A3B"})
    assert isinstance(refused, str) and "no built-in shape" in refused


def test_sweep_grid_has_an_ep_axis_and_dense_keys_are_unchanged() -> None:
    from lumos.simulator.sweep.space import SweepSpace, enumerate_plans, plan_key

    space = SweepSpace(
        model="x", gpus=8, gbs=8, seq=SEQ, tp=(1,), pp=(1,), recompute=("none",), ep=(1, 2, 3, 8)
    )
    out = enumerate_plans(space, _model(), 8)
    assert sorted(p.ep for p in out.plans) == [1, 2, 8]  # ep 3 divides no 8 experts
    assert plan_key(out.plans[0]) == "tp1-pp1-vp1-cp1-dp8-mbs1-z1-none-bf16"
    assert {plan_key(p) for p in out.plans if p.ep == 8} >= {
        "tp1-pp1-vp1-cp1-dp8-mbs1-z1-none-bf16-ep8"
    }


def test_recompute_modules_rerun_norms_and_expert_activation_and_keep_less() -> None:
    """Megatron-Core `recompute_modules: [layernorm, moe_act]` (GPT-OSS's H100 recipe):
    both norms and the experts' activation run again in the backward, the core attention
    does not (not listed), and a layer keeps its two norm outputs and the activation output
    less."""
    km = KernelModel.for_gpu(load_system("h100").gpu)
    base = _plan(ep=4, recompute="selective")
    plan = _plan(ep=4, recompute="selective", recompute_modules="layernorm,moe_act")
    gen = Generator(_model(), plan, km)
    blk = gen.block(0, 0, False)
    names = {gen.names.as_list()[i] for i in blk.name}
    assert {"layer0.norm1.recompute", "layer0.norm2.recompute"} <= names
    assert "layer0.moe.activation.recompute" in names
    assert not any("attention_bwd.recompute" in n for n in names)
    old, new = plan_memory(Generator(_model(), base, km)), plan_memory(gen)
    z = SEQ * 2  # routed rows on one rank
    kept_less = 2 * SEQ * 64 * 2 + z * 32 * 2  # two norm outputs, the activation output
    # on 1 of the 2 layers: the one in its backward holds its re-run forward (memory.py)
    assert (old.activations_gb - new.activations_gb) * 1e9 == pytest.approx(kept_less)
    with pytest.raises(ConfigError, match="'moe' is not modelled"):
        _plan(ep=4, recompute="selective", recompute_modules="moe")
    with pytest.raises(ConfigError, match="need selective"):
        _plan(ep=4, recompute_modules="moe_act")


def test_all_to_all_prices_at_the_measured_nccl_bus_bandwidth() -> None:
    """An 8-GPU all-to-all inside an H100 node: bus bandwidth ~370 GB/s, as nccl-tests
    measure for collectives other than NVLS all-reduce (../shared/reference/
    hardware-and-anchors.md); across nodes each GPU's 400 Gb/s NIC (50 GB/s) bounds it."""
    from lumos.simulator.network.api import ALL_TO_ALL as A2A
    from lumos.simulator.network.nccl import make_pricer

    pricer = make_pricer(load_system("h100"))
    size = 256 << 20
    intra = pricer.collective_ns(A2A, size, list(range(8)))
    assert 7 / 8 * size / intra == pytest.approx(370, rel=0.1)
    inter = pricer.collective_ns(A2A, size, list(range(32)))
    assert 24 / 32 * size / inter == pytest.approx(50, rel=0.2)


def test_moe_estimate_states_how_rough_it_is() -> None:
    # a user reading an MoE figure learns what the published MoE runs say of it; a dense
    # estimate carries no such line
    res = estimate(_model(), _plan(ep=4), "h100")
    assert any(
        a.startswith("accuracy:") and "published H100 MoE runs" in a for a in res.assumptions
    )
    dense = estimate(
        load_model("gpt3-350m"), ParallelPlan(tp=1, pp=1, dp=2, mbs=1, gbs=2, seq=512), "h100"
    )
    assert not any(a.startswith("accuracy:") for a in dense.assumptions)
