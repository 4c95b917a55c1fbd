"""Hybrid Mamba-2 models with mixture-of-experts layers (Megatron's pattern letter `E`,
Nemotron 3): an `E` layer is the transformer MoE layer's MLP half (`moe`: router,
dispatch, experts, combine, shared expert) between its own norm and residual; EP
collectives sit on `E` layers only; weights, activations and model FLOPs count the kind;
Nemotron 3 Nano's config.json and built-in have the published sizes; the published
AutoModel row stays within a stated bound; what is not modelled is refused by name."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.network.api import ALL_TO_ALL
from lumos.simulator.workload import ParallelPlan, Recompute, estimate
from lumos.simulator.workload.block import EP
from lumos.simulator.workload.dims import Ctx
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.hybrid_memory import hybrid_activation_bytes
from lumos.simulator.workload.hybrid_spec import hybrid_flops_per_sequence
from lumos.simulator.workload.mamba import mamba_activation_bytes
from lumos.simulator.workload.memory import _attention_bytes, _moe_mlp_bytes
from lumos.simulator.workload.spec import ModelSpec, load_model, model_from_dict
from tests.simulator.workload.heldout_files import row_error
from tests.simulator.workload.model_battery import CONFIGS
from tests.simulator.workload.passes import stage0_pass
from tests.simulator.workload.test_hybrid import SMALL as HYBRID_SMALL

#: test_hybrid's one-layer-of-each-kind model (hidden 256, 4 heads of 64, 2 KV heads, a
#: Mamba-2 mixer of 8 heads of 32, state 16, 2 groups) as Mamba, MoE, attention, MoE:
#: 8 squared-ReLU experts of 128, top-2, a shared expert of 256
SMALL = {
    **HYBRID_SMALL,
    "pattern": "ME*E",
    "experts": 8,
    "top_k": 2,
    "moe_ffn": 128,
    "shared_ffn": 256,
}
SEQ = 256
KM = KernelModel.for_gpu(load_system("h100").gpu)
#: TP 2 with sequence parallelism, EP 2 over DP 2 (expert TP: Megatron's default, = TP)
PLAN = ParallelPlan(tp=2, dp=2, ep=2, seq=SEQ, gbs=4, sequence_parallel=True)


def _model(**extra: object) -> ModelSpec:
    return model_from_dict({**SMALL, **extra}, "small", "small-hybrid-moe")


def _names(cols: dict[str, np.ndarray], layer: int) -> list[str]:
    prefix = f"layer{layer}."
    return [str(n)[len(prefix) :] for n in cols["name"] if str(n).startswith(prefix)]


def test_moe_layer_weights_match_a_hand_count() -> None:
    """An E layer: its norm, the router (256 x 8), the shared expert (2 x 256 x 256) and 8
    experts of 2 x 256 x 128 (ungated); one token uses 2 of them. The Mamba and attention
    layers are the dense hybrid's (no router or shared expert on them)."""
    m = _model()
    mamba = 256 * 584 + 320 * 5 + 3 * 8 + 256 * 257 + 256
    attention = 256 * (4 + 2 * 2) * 64 + 4 * 64 * 256 + 256
    expert = 2 * 256 * 128
    moe_dense = 256 + 256 * 8 + 2 * 256 * 256
    rest = 2 * 1024 * 256 + 256  # embedding, output layer, final norm
    assert m.params() == mamba + attention + 2 * (moe_dense + 8 * expert) + rest
    assert m.params(active=True) == mamba + attention + 2 * (moe_dense + 2 * expert) + rest
    assert [m.is_moe_layer(i) for i in range(4)] == [False, True, False, True]


def test_moe_layer_runs_the_moe_mlp_between_its_norm_and_residual() -> None:
    """Forward: norm → router, top-k, permute → dispatch all-to-all (+ expert-TP gather) →
    grouped FC1 / activation / FC2 over the 4 local experts → combine → shared expert (TP
    gather / reduce-scatter) → unpermute → residual; no attention and no dense MLP."""
    names = _names(stage0_pass(_model(), PLAN, KM, forward=True), 1)
    assert names[0] == "norm2" and names[-1] == "residual2"
    order = ["moe.router", "moe.topk", "moe.permute", "moe.dispatch", "moe.fc1"]
    order += ["moe.activation", "moe.fc2", "moe.combine", "shared.fc1", "shared.fc2"]
    order += ["moe.unpermute"]
    assert [n for n in names if n in order] == order
    assert not [n for n in names if n.startswith(("qkv", "attention", "fc1", "fc2", "in_proj"))]
    counts = Counter(names)
    assert counts["moe.dispatch_all_gather"] == counts["moe.combine_reduce_scatter"] == 1


def test_moe_layer_backward_mirrors_it() -> None:
    """Backward: the shared expert's gradients, the combine's gradient all-to-all, the
    experts' data and weight gradients, the dispatch's, the router's, the norm's; under full
    recompute the layer's forward runs again first."""
    names = _names(stage0_pass(_model(), PLAN, KM, forward=False), 3)
    order = ["residual2_bwd", "shared.fc2.dgrad", "moe.combine_bwd", "moe.fc2.dgrad"]
    order += ["moe.fc1.wgrad", "moe.dispatch_bwd", "moe.router.wgrad", "norm2_bwd"]
    assert [n for n in names if n in order] == order
    full = _names(stage0_pass(_model(), replace(PLAN, recompute=Recompute.FULL), KM, False), 3)
    assert full[: full.index("residual2_bwd")][-1] == "recompute.residual2"


@pytest.mark.parametrize("forward", [True, False])
def test_ep_all_to_alls_sit_on_the_moe_layers_only(forward: bool) -> None:
    """Each E layer runs three all-to-alls on the EP group a pass (the dispatch, its routing
    probabilities' and the combine; backward their gradients), and the forward the
    token-count all-gather before them (`moe_meta`); the Mamba and attention layers none."""
    cols = stage0_pass(_model(), PLAN, KM, forward)
    layer = np.asarray([str(n).split(".")[0] for n in cols["name"]])
    a2a = (cols["ctype"] == ALL_TO_ALL) & (cols["group"] == EP)
    assert Counter(layer[a2a].tolist()) == {"layer1": 3, "layer3": 3}
    on_ep = Counter(layer[cols["group"] == EP].tolist())
    assert on_ep == ({"layer1": 4, "layer3": 4} if forward else {"layer1": 3, "layer3": 3})


def test_expert_weights_and_buckets_are_the_moe_layers() -> None:
    """Routed-expert weights are on E layers only (the 4 local experts of 8, split over
    expert TP 2); the other weights of an E layer are its norm, router and shared expert."""
    m = _model()
    gen = Generator(m, PLAN, KM)
    local = 4 * 2 * 256 * 128 // 2
    assert gen.expert_params(0) == [0, local, 0, local]
    dense = gen._dense_layer_params(1)
    assert dense == (256 + 256 * 8 + 2 * 256 * 256) // 2


def test_activations_are_the_mean_over_kinds_with_the_moe_mlp() -> None:
    """An E layer keeps what a transformer MoE layer's MLP half keeps (`_moe_mlp_bytes`)."""
    m = _model()
    ctx = Ctx.make(m, PLAN, KM)
    mamba = mamba_activation_bytes(ctx, 2, ctx.T_sp * ctx.h * 2)
    expected = (mamba + _attention_bytes(ctx) + 2 * _moe_mlp_bytes(ctx)) / 4
    assert hybrid_activation_bytes(ctx) == pytest.approx(expected)


def test_model_flops_count_the_routed_and_shared_experts() -> None:
    """Megatron-Bridge's hybrid count: an E layer 6 x (top_k x s·h·moe_ffn + s·h·shared)
    x 2 (up and down, ungated), the router not counted."""
    m = _model()
    no_moe = hybrid_flops_per_sequence(replace(m, pattern="M*"), SEQ)
    moe = 6 * 2 * SEQ * 256 * (2 * 128 + 256)
    assert hybrid_flops_per_sequence(m, SEQ) == pytest.approx(no_moe + 2 * moe)


def test_nemotron_3_nano_has_the_published_size() -> None:
    """nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B's model card: 31.6 B parameters, about 3.2 B
    active (3.6 B with the embeddings); its config.json reads as the built-in (52 layers:
    23 Mamba-2, 23 MoE, 6 attention; RMSNorm although the file names only LayerNorm
    epsilons; the shared expert its 3712-wide MLP, not n_shared_experts x 1856)."""
    spec = load_model(CONFIGS / "NVIDIA-Nemotron-3-Nano-30B-A3B.json")
    builtin = load_model("nemotron-3-nano-30b")
    assert replace(spec, name=builtin.name, seq=builtin.seq) == builtin
    assert Counter(builtin.pattern) == {"M": 23, "E": 23, "*": 6}
    assert (builtin.shared_ffn, builtin.norm.value) == (3712, "rmsnorm")
    assert builtin.params() / 1e9 == pytest.approx(31.6, abs=0.05)
    active = builtin.params(active=True)
    assert active / 1e9 == pytest.approx(3.58, abs=0.01)
    assert (active - builtin.vocab * builtin.hidden) / 1e9 == pytest.approx(3.2, abs=0.05)


def test_layers_block_type_spells_the_pattern() -> None:
    """A NemotronH config that lists `layers_block_type` instead of the pattern string."""
    blocks = ["mamba", "moe", "attention", "moe"]
    data = {"model_type": "nemotron_h", "num_hidden_layers": 4, "hidden_size": 256}
    data |= {"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1024}
    data |= {"mamba_num_heads": 8, "mamba_head_dim": 32, "ssm_state_size": 16, "n_groups": 2}
    data |= {"n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128}
    data |= {"n_shared_experts": 1, "moe_shared_expert_intermediate_size": 256}
    spec = model_from_dict({**data, "layers_block_type": blocks}, "cfg")
    assert (spec.pattern, spec.shared_ffn, spec.experts) == ("ME*E", 256, 8)


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"experts": None, "top_k": None, "moe_ffn": None, "shared_ffn": None}, "need experts"),
        ({"pattern": "M*-M"}, "experts need E layers"),
        ({"moe_latent_size": 64}, "LatentMoE"),
        ({"first_dense": 1}, "moe_every / first_dense"),
        ({"pattern": "ME*X"}, "layer kind 'X'"),
    ],
)
def test_unmodelled_hybrid_moe_is_refused(extra: dict[str, object], match: str) -> None:
    data = {k: v for k, v in {**SMALL, **extra}.items() if v is not None}
    with pytest.raises(ConfigError, match=match):
        model_from_dict(data, "small")


def test_a2a_overlap_is_refused_for_a_hybrid() -> None:
    """moe_overlap merges transformer layers' halves; a hybrid's are not."""
    with pytest.raises(ConfigError, match="a2a_overlap with a hybrid"):
        estimate(_model(), replace(PLAN, a2a_overlap=True), "h100")


#: first run (before any change made with it in view): -12.7 %; the bound leaves room for
#: accuracy work, not for a regression past it
BOUND = {"AM2602-Nemotron-V3-Nano-30B": 0.20}


@pytest.mark.parametrize("row_id", sorted(BOUND))
def test_nemotron_3_nano_row_stays_within_its_bound(row_id: str) -> None:
    """NeMo AutoModel's Nemotron V3 Nano 30B (26.02) on 8 H100s, estimated as the other
    AutoModel rows are (Megatron-Core, distributed optimizer, DeepEP, fused grouped GEMM)."""
    err = row_error("MOE", row_id)
    assert abs(err) <= BOUND[row_id], f"{row_id}: {100 * err:+.1f} %"
