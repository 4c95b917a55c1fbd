"""Config.json layouts of current model families (`tests/data/model_configs`, sources in its
SOURCES.md): each reads as the block its modeling code builds, its parameter count matching
one counted here from the config and the published size, and a plan estimates; the
families lumos cannot price are refused naming what their block is. Before, every one of
these model types was refused as "not one lumos knows" (MPT as ALiBi)."""

from __future__ import annotations

import pytest

from lumos.api import estimate
from lumos.errors import ConfigError
from lumos.simulator.workload.spec import Mlp, Norm, load_model, model_from_dict
from tests.simulator.workload.model_battery import CONFIGS


def _llama_count(
    h: int, layers: int, heads: int, kv: int, d: int, ffn: int, vocab: int, tied: bool,
    qkv_bias: bool = False, norms: int = 2,
) -> int:  # fmt: skip
    """Weights of a Llama-style decoder as transformers builds them: q, k, v, o; gate, up,
    down; `norms` RMSNorms a layer and the final one; the embedding (and an untied head)."""
    attn = (
        h * heads * d + 2 * h * kv * d + heads * d * h + ((heads + 2 * kv) * d if qkv_bias else 0)
    )
    layer = attn + 3 * h * ffn + norms * h
    return layers * layer + h + vocab * h * (1 if tied else 2)


#: stem -> (count from the config, published billions, what publishes it)
DENSE = {
    # zai-org/GLM-4-9B-0414: 4 norms a layer (post_self_attn / post_mlp besides the two)
    "GLM-4-9B-0414": (_llama_count(4096, 40, 32, 2, 128, 13696, 151552, False, True, 4), 9.40),
    # ByteDance-Seed/seed-oss README, Model Summary: 36B
    "Seed-OSS-36B-Base": (_llama_count(5120, 64, 80, 8, 128, 27648, 155136, False, True), 36.0),
    # internlm/internlm2_5-7b: 7.74 B
    "internlm2_5-7b": (_llama_count(4096, 32, 32, 8, 128, 14336, 92544, False), 7.74),
    # LGAI-EXAONE/EXAONE-3.5-7.8B-Instruct: 7.8 B (6.98 B without embeddings)
    "EXAONE-3.5-7.8B-Instruct": (_llama_count(4096, 32, 32, 8, 128, 14336, 102400, False), 7.8),
    # baidu/ERNIE-4.5-0.3B-PT: 0.36 B, tied
    "ERNIE-4.5-0.3B-PT": (_llama_count(1024, 18, 16, 2, 128, 3072, 103424, True), 0.36),
}


@pytest.mark.parametrize("stem", sorted(DENSE))
def test_dense_family_counts_as_built_and_as_published(stem: str) -> None:
    """lumos' count equals the one counted from the config (to 0.01 %: a misread bias, norm,
    head width or tying moves it by more) and is within 0.5 % of the published size."""
    spec = load_model(CONFIGS / f"{stem}.json")
    count, published = DENSE[stem]
    assert spec.params() == pytest.approx(count, rel=1e-4)
    assert spec.params() / 1e9 == pytest.approx(published, rel=5e-3)
    assert (spec.mlp, spec.norm, spec.position) == (Mlp.SWIGLU, Norm.RMSNORM, "rope")


def test_block_traits_each_family_fixes() -> None:
    """GLM-4-0414 has norms after attention and MLP (Glm4DecoderLayer); EXAONE's
    `layer_norm_epsilon` belongs to RMSNorms (ExaoneRMSNorm), not LayerNorms; Seed-OSS
    biases q/k/v only; ERNIE 4.5 ties its output layer."""
    glm = load_model(CONFIGS / "GLM-4-9B-0414.json")
    assert glm.post_norms and not glm.qk_norm and not glm.bias
    assert load_model(CONFIGS / "EXAONE-3.5-7.8B-Instruct.json").norm is Norm.RMSNORM
    assert load_model(CONFIGS / "ERNIE-4.5-0.3B-PT.json").tied_embeddings
    with_out_bias = {"model_type": "seed_oss", "hidden_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 256,
                     "attention_out_bias": True, "rope_parameters": {"rope_theta": 1e7}}  # fmt: skip
    assert model_from_dict(with_out_bias, "seed").layers == 2


def test_glm45_air_reads_as_gqa_moe_with_mtp() -> None:
    """GLM-4.5-Air: 46 layers, the first dense (10,944 wide), then 128 experts of 1,408 top 8
    with one shared, GQA 96 / 8 heads of 128, one MTP layer; 106.85 B without the MTP layer
    (the GLM-4.5 report, arXiv 2508.06471: 106 B total, 12 B active; lumos' active count
    includes the 1.24 B of embedding and output layer the report's 12 B leaves out)."""
    spec = load_model(CONFIGS / "GLM-4.5-Air.json")
    assert (spec.experts, spec.top_k, spec.first_dense, spec.mtp_layers) == (128, 8, 1, 1)
    assert (spec.heads, spec.kv_heads, spec.head_dim) == (96, 8, 128)
    h, attn = 4096, 4096 * 96 * 128 * 2 + 2 * 4096 * 8 * 128 + (96 + 16) * 128 + 2 * 4096
    moe = attn + 128 * h + 129 * 3 * h * 1408
    dense = attn + 3 * h * 10944
    total = dense + 45 * moe + h + 2 * 151552 * h
    assert spec.params() == pytest.approx(total, rel=1e-4)
    assert spec.params() / 1e9 == pytest.approx(106.0, rel=1e-2)  # 106.85: +0.8 %
    embeddings = 2 * 151552 * h
    assert (spec.params(active=True) - embeddings) / 1e9 == pytest.approx(12.0, rel=2e-2)


def test_mpt_reads_alibi_as_causal_attention() -> None:
    """MPT-7B (was refused for ALiBi): LayerNorm, GeLU 4x, no biases, tied, no position
    embedding priced (ALiBi's bias is added in the attention kernel); 6.65 B counted (the
    card's rounded 6.7 B). A prefix-LM mask is refused."""
    spec = load_model(CONFIGS / "mpt-7b.json")
    assert (spec.mlp, spec.norm, spec.position, spec.tied_embeddings, spec.bias) == (
        Mlp.GELU, Norm.LAYERNORM, "none", True, False,
    )  # fmt: skip
    layer = 4 * 4096 * 4096 + 2 * 4096 * 16384 + 2 * 2 * 4096
    assert spec.params() == 32 * layer + 2 * 4096 + 50432 * 4096
    assert spec.params() / 1e9 == pytest.approx(6.7, rel=1e-2)
    r = estimate(CONFIGS / "mpt-7b.json", hw="h100", dp=8, gbs=64, seq=2048)
    assert 0.2 < r.mfu < 0.8
    with pytest.raises(ConfigError, match="prefix-LM"):
        model_from_dict({"model_type": "mpt", "d_model": 64, "n_heads": 4, "n_layers": 2,
                         "vocab_size": 256, "attn_config": {"prefix_lm": True}}, "mpt")  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "names"),
    [
        ("qwen3_next", "Gated DeltaNet"),
        ("minimax", "lightning \\(linear\\) attention"),
        ("ernie4_5_moe", "ERNIE 4.5's experts"),
        ("hunyuan_v1_moe", "Hunyuan's block and experts"),
    ],
)
def test_families_lumos_cannot_price_are_refused_by_name(kind: str, names: str) -> None:
    """Never priced as a Llama: the refusal names the model type and what its block is."""
    with pytest.raises(ConfigError, match=rf"model_type '{kind}' means {names}"):
        model_from_dict({"model_type": kind, "hidden_size": 64}, "cfg")
    if kind == "qwen3_next":
        with pytest.raises(ConfigError, match="Gated DeltaNet"):
            load_model(CONFIGS / "Qwen3-Next-80B-A3B-Instruct.json")


@pytest.mark.parametrize("stem", ["GLM-4-9B-0414", "Seed-OSS-36B-Base", "GLM-4.5-Air"])
def test_new_families_estimate_a_plan(stem: str) -> None:
    plans = {
        "GLM-4-9B-0414": {"tp": 2, "dp": 4, "gbs": 32, "seq": 4096},
        "Seed-OSS-36B-Base": {"tp": 8, "pp": 2, "dp": 2, "gbs": 32, "seq": 4096},
        "GLM-4.5-Air": {"tp": 2, "pp": 4, "ep": 8, "dp": 8, "gbs": 128, "seq": 4096},
    }
    r = estimate(CONFIGS / f"{stem}.json", hw="h100", **plans[stem])
    assert 0.05 < r.mfu < 0.8 and r.fits
