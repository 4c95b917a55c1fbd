"""Multi-head latent attention (DeepSeek-V2/V3 MLA): a small hand-checked spec's attention
runs exactly the expected GEMMs (shapes, order) and TP collectives at TP 1 and TP 2, the
flash kernel is priced with the QK and V head widths, weights and activations match a hand
count (down-projections replicated over TP), the HF keys parse (and half an MLA spec is
refused), plans MLA is not modelled under are refused, and the DeepSeek-V3 / Kimi K2
built-ins have the published sizes."""

from __future__ import annotations

from collections import Counter

import pytest

from lumos.errors import ConfigError
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.graph import COLL
from lumos.simulator.workload import ParallelPlan, estimate, generate
from lumos.simulator.workload.block import Block, Names
from lumos.simulator.workload.dims import Ctx
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.layer import attn_backward, attn_forward
from lumos.simulator.workload.memory import _attention_bytes
from lumos.simulator.workload.spec import ModelSpec, load_model, model_from_dict
from lumos.simulator.workload.step import model_flops_per_step, plan_memory

#: hidden 64, 4 heads, q_lora 32, kv_lora 16, QK head 8 + 4 (RoPE), V head 8: HF names
SMALL = {
    "layers": 2,
    "hidden": 64,
    "heads": 4,
    "ffn": 128,
    "vocab": 256,
    "mlp": "swiglu",
    "norm": "rmsnorm",
    "q_lora_rank": 32,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 4,
    "v_head_dim": 8,
}
SEQ = 16


def _model(**extra: object) -> ModelSpec:
    return model_from_dict({**SMALL, **extra}, "small", "small-mla")


def _ctx(tp: int) -> Ctx:
    m = _model()
    plan = ParallelPlan.build(m, tp=tp, mbs=1, seq=SEQ)
    return Ctx.make(m, plan, KernelModel.for_gpu(load_system("h100").gpu))


def _record(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int]]:
    shapes: list[tuple[int, int, int]] = []
    real = Ctx.gemm

    def spy(self: Ctx, m: int, n: int, k: int, *a: object, **kw: object) -> object:
        shapes.append((m, n, k))
        return real(self, m, n, k, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Ctx, "gemm", spy)
    return shapes


def _colls(blk: Block) -> list[tuple[str, int]]:
    names = blk.names.as_list()
    return [
        (names[blk.name[i]], blk.cols["csize"][i])
        for i in range(len(blk.name))
        if blk.cols["type"][i] == COLL
    ]


def test_mla_forward_gemms_tp1(monkeypatch: pytest.MonkeyPatch) -> None:
    shapes = _record(monkeypatch)
    blk = Block(Names())
    attn_forward(blk, _ctx(1), "layer0", (), 0)
    # q_down [T, h -> q_lora], kv_down [h -> kv_lora + rope], q_up [q_lora -> 4 x 12],
    # kv_up [kv_lora -> 4 x (8 + 8)], proj [4 x 8 -> h]
    assert shapes == [(16, 32, 64), (16, 20, 64), (16, 48, 32), (16, 64, 16), (16, 64, 32)]
    names = Counter(blk.names.as_list()[i] for i in blk.name)
    for op in ("q_down", "kv_down", "q_norm", "kv_norm", "q_up", "kv_up", "rope_q", "rope_kv"):
        assert names[f"layer0.{op}"] == 1, op
    assert not _colls(blk) and "layer0.qkv" not in names


def test_mla_forward_gemms_and_collectives_tp2(monkeypatch: pytest.MonkeyPatch) -> None:
    """TP 2 with SP: the down-projections on the rank's 8 tokens with whole weights, the
    up-projections and proj on all 16 tokens with half the heads; the up-projections
    all-gather the latents (8 x 32 and 8 x (16 + 4) BF16), not [8, 64] activations."""
    shapes = _record(monkeypatch)
    blk = Block(Names())
    attn_forward(blk, _ctx(2), "layer0", (), 0)
    assert shapes == [(8, 32, 64), (8, 20, 64), (16, 24, 32), (16, 32, 16), (16, 64, 16)]
    assert _colls(blk) == [
        ("layer0.q_up.all_gather", 8 * 32 * 2),
        ("layer0.kv_up.all_gather", 8 * 20 * 2),
        ("layer0.proj.reduce_scatter", 16 * 64 * 2),
    ]


def test_mla_backward_gemms_and_collectives_tp2(monkeypatch: pytest.MonkeyPatch) -> None:
    shapes = _record(monkeypatch)
    blk = Block(Names())
    attn_backward(blk, _ctx(2), "layer0", (), 0)
    assert shapes == [
        (16, 16, 64),  # proj dgrad [T, h -> 2 x 8]
        (16, 64, 16),  # proj wgrad
        (16, 16, 32),  # kv_up dgrad [T, 32 -> kv_lora]
        (32, 16, 16),  # kv_up wgrad
        (8, 64, 20),  # kv_down dgrad (own 8 tokens, no collective)
        (20, 64, 8),  # kv_down wgrad
        (16, 32, 24),  # q_up dgrad
        (24, 32, 16),  # q_up wgrad
        (8, 64, 32),  # q_down dgrad
        (32, 64, 8),  # q_down wgrad
    ]
    assert _colls(blk) == [
        ("layer0.proj.dgrad.all_gather", 8 * 64 * 2),
        ("layer0.kv_up.input_all_gather", 8 * 20 * 2),
        ("layer0.kv_up.dgrad_reduce", 16 * 16 * 2),
        ("layer0.q_up.input_all_gather", 8 * 32 * 2),
        ("layer0.q_up.dgrad_reduce", 16 * 32 * 2),
    ]


def test_flash_attention_priced_with_qk_and_v_widths() -> None:
    """QKᵀ at the QK width 12 and AV at the V width 8: causal forward FLOPs =
    2 x heads x s x s x (12 + 8) / 2."""
    blk = Block(Names())
    attn_forward(blk, _ctx(1), "layer0", (), 0)
    names = blk.names.as_list()
    (i,) = [i for i in range(len(blk.name)) if names[blk.name[i]] == "layer0.attention"]
    assert blk.cols["flops"][i] == 2 * 4 * SEQ * SEQ * (12 + 8) // 2


def test_parameters_and_activations_hand_count() -> None:
    m = _model()
    replicated = 64 * 32 + 32 + 64 * 20 + 16  # down-projections and their norms
    split = 32 * 4 * 12 + 16 * 4 * 16 + 4 * 8 * 64  # q_up, kv_up, proj
    mlp = 64 * 128 * 3
    assert m.mla_replicated_params() == replicated
    assert m.layer_params() == replicated + split + 2 * 64 + mlp
    assert _ctx(2).layer_params_local() == (split + 2 * 64 + mlp) // 2 + replicated
    # x, norm1 output, q k v (4 x (12 + 12 + 8)), attention output (4 x 8), latents
    # (q_lora and kv_lora before and after their norms, the RoPE key)
    x = 16 * 64 * 2
    assert _attention_bytes(_ctx(1)) == 2 * x + 16 * 128 * 2 + 16 * 32 * 2 + 16 * 100 * 2


def test_hf_keys_and_half_an_mla_spec() -> None:
    m = _model(q_lora_rank=None)  # DeepSeek-V2-Lite: queries projected directly
    assert (m.q_lora, m.kv_lora, m.qk_dim, m.v_dim, m.kv_heads) == (0, 16, 12, 8, 4)
    with pytest.raises(ConfigError, match="needs v_head_dim"):
        model_from_dict({k: v for k, v in SMALL.items() if k != "v_head_dim"}, "x")
    with pytest.raises(ConfigError, match="needs kv_lora_rank"):
        model_from_dict({k: v for k, v in SMALL.items() if k != "kv_lora_rank"}, "x")


def test_plans_mla_is_not_modelled_under_are_refused() -> None:
    for bad in ({"flash_attention": False}, {"framework": "torchtitan"}):
        with pytest.raises(ConfigError, match="latent attention"):
            ParallelPlan.build(_model(), seq=SEQ, **bad)  # type: ignore[arg-type]


def test_small_mla_moe_estimates_end_to_end() -> None:
    m = _model(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32)
    plan = ParallelPlan.build(m, tp=2, pp=2, dp=2, ep=2, mbs=1, gbs=4, seq=SEQ)
    est = estimate(m, plan, "h100")
    assert est.iteration_time_s > 0 and est.memory.fits and est.mfu > 0


def test_deepseek_v3_and_kimi_k2_builtins() -> None:
    """DeepSeek-V3: 671B total, 36.6B activated counting the output head but not the input
    embedding (DeepSeek-V3 README_WEIGHTS.md; the multi-token-prediction module excluded);
    within 0.2 %. Kimi K2: 64 heads, 384 experts, one dense layer."""
    ds = load_model("deepseek-v3")
    attn = 7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256
    attn += 128 * 128 * 7168 + 2 * 7168
    assert ds.attention_params() == attn
    assert ds.params() == pytest.approx(671e9, rel=2e-3)
    assert ds.params(active=True) - ds.vocab * ds.hidden == pytest.approx(36.6e9, rel=2e-3)
    assert (ds.moe_layers, ds.shared_ffn, ds.attention_width) == (58, 2048, 128 * 160)
    k2 = load_model("kimi-k2")
    assert (k2.heads, k2.experts, k2.moe_layers, k2.vocab) == (64, 384, 60, 163840)


def _names_by_stage(model: ModelSpec) -> list[Counter[str]]:
    plan = ParallelPlan.build(model, tp=2, pp=2, dp=2, ep=2, mbs=1, gbs=4, seq=SEQ)
    step = generate(model, plan, "h100")
    return [Counter(g.names[i] for i in g.name_idx) for g in step.graphs]


def test_mtp_adds_exactly_its_ops_on_the_last_stage() -> None:
    """One MTP layer (Megatron-Core `mtp_num_layers`): stage 0 is unchanged but for the
    embedding-gradient all-reduce it now shares with the last stage; the last stage gains,
    per micro-batch (2), the shifted-token embedding, two norms, the concatenation,
    eh_proj [2h -> h/tp] with its gathers, one MoE layer (index 2, the same ops as the
    model's layers) and a loss head, forward and backward."""
    kw = {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32}
    base, mtp = _names_by_stage(_model(**kw)), _names_by_stage(_model(**kw, mtp_num_layers=1))
    assert mtp[0] - base[0] == Counter({"embedding.grad_all_reduce": 1})
    assert not base[0] - mtp[0] and not base[1] - mtp[1]
    added = mtp[1] - base[1]
    layer1 = Counter({k.split(".", 1)[1]: v for k, v in base[1].items() if k.startswith("layer1.")})
    layer = Counter(
        {k.split(".", 2)[2]: v for k, v in added.items() if k.startswith("mtp0.layer.")}
    )
    # the host's issue of a layer after a wait in its block is named so (moe_host): the MTP
    # layer follows layer 1's wait, layer 1 is the stage's first
    layer["moe.host_issue"] = layer.pop("moe.host_issue_chained", 0) + layer["moe.host_issue"]
    assert layer == layer1  # the MTP layer runs what a model layer runs
    head = [n for n in base[1] if n.startswith(("final_norm", "output", "cross_entropy", "loss"))]
    rest = {k: v for k, v in added.items() if not k.startswith("mtp0.layer.")}
    own = ["embedding", "embedding.reduce", "enorm", "hnorm", "concat", "eh_proj"]
    own += ["eh_proj.all_gather", "eh_proj.output_all_gather", "eh_proj.output_grad_reduce_scatter"]
    own += ["eh_proj.dgrad", "eh_proj.input_all_gather", "eh_proj.dgrad_reduce", "eh_proj.wgrad"]
    own += ["concat_bwd", "hnorm_bwd", "enorm_bwd", "embedding.grad_all_gather", "embedding_bwd"]
    shared = {"embedding.grad_all_reduce": 1}  # the embedding copy's gradient, with stage 0
    assert rest == {f"mtp0.{n}": base[1][n] for n in head} | {f"mtp0.{n}": 2 for n in own} | shared


def test_mtp_weights_memory_and_flops() -> None:
    """DeepSeek-V3's MTP module: 11.5B parameters besides the shared embedding and head
    (README_WEIGHTS.md; lumos 11.61B, within 1 %); it adds to the last stage's weights
    (its layer, eh_proj, the embedding copy) and activations, and to the model FLOPs."""
    ds = load_model("deepseek-v3")
    assert ds.mtp_layers == 1 and ds.params() == pytest.approx(671e9, rel=2e-3)
    assert ds.mtp_params() == pytest.approx(11.5e9, rel=1e-2)
    kw = {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32}
    base, mtp = _model(**kw), _model(**kw, mtp_num_layers=1)
    plan = ParallelPlan.build(base, tp=2, pp=2, dp=2, ep=2, mbs=1, gbs=4, seq=SEQ)
    km = KernelModel.for_gpu(load_system("h100").gpu)
    g0, g1 = Generator(base, plan, km), Generator(mtp, plan, km)
    assert g1.chunk_params(0) == g0.chunk_params(0)
    local = g1.ctx.local_params(mtp.moe_dense_params()) + 2 * 64 * 64 // 2 + 3 * 64
    assert sum(g1.chunk_params(1)) - sum(g0.chunk_params(1)) == local + 128 * 64  # + embedding
    # 8 experts over ep 2, each split over expert TP (= tp 2)
    assert sum(g1.expert_params(1)) - sum(g0.expert_params(1)) == 4 * mtp.expert_params() // 2
    assert plan_memory(g1).activations_gb > plan_memory(g0).activations_gb
    assert model_flops_per_step(mtp, plan) > model_flops_per_step(base, plan)


def test_mtp_under_all_to_all_overlap_runs_unmerged() -> None:
    """With `a2a_overlap` the MTP layer runs beside the merged pairs, once a pass."""
    m = _model(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, mtp_num_layers=1)
    plan = ParallelPlan.build(m, dp=2, ep=2, mbs=1, gbs=8, seq=SEQ, a2a_overlap=True)
    (g,) = generate(m, plan, "h100").graphs
    names = Counter(g.names[i] for i in g.name_idx)
    assert names["mtp0.eh_proj"] == names["mtp0.eh_proj.dgrad"] == names["output"] == 4


def test_mla_up_proj_recompute_reruns_the_up_projections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Megatron's `mla_up_proj` module: q, k, v are not kept; the up-projections (with their
    latent gathers) and the RoPE kernels run again before the core attention's backward."""
    m = _model()
    plan = ParallelPlan.build(
        m, tp=2, mbs=1, seq=SEQ, recompute="selective", recompute_modules="mla_up_proj"
    )
    ctx = Ctx.make(m, plan, KernelModel.for_gpu(load_system("h100").gpu))
    shapes = _record(monkeypatch)
    blk = Block(Names())
    attn_backward(blk, ctx, "layer0", (), 0)
    assert shapes[2:4] == [(16, 24, 32), (16, 32, 16)]  # q_up, kv_up after proj's backward
    names = blk.names.as_list()
    order = [names[i] for i in blk.name]
    rerun = [n for n in order if n.startswith("layer0.recompute.")]
    assert rerun == [
        "layer0.recompute.q_up.all_gather",
        "layer0.recompute.q_up",
        "layer0.recompute.kv_up.all_gather",
        "layer0.recompute.kv_up",
        "layer0.recompute.rope_q",
        "layer0.recompute.rope_kv",
    ]
    assert order.index("layer0.recompute.rope_kv") < order.index("layer0.attention_bwd")
    assert _attention_bytes(_ctx(2)) - _attention_bytes(ctx) == 16 * 2 * (12 + 12 + 8) * 2
    with pytest.raises(ConfigError, match="mla_up_proj"):
        dense = model_from_dict({"layers": 2, "hidden": 64, "heads": 4, "vocab": 256}, "d")
        ParallelPlan.build(dense, recompute="selective", recompute_modules="mla_up_proj")
