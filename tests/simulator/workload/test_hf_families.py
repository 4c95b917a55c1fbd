"""What a config.json's `model_type` fixes (`hf_families`) and the keys `hf_spec` reads or
drops, each test named after the input that used to be misread or refused (configs from
the battery, `tests/data/model_configs`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lumos.errors import ConfigError
from lumos.simulator.workload.spec import Mlp, load_model, model_from_dict
from tests.simulator.workload import hf_configs as cfg
from tests.simulator.workload.model_battery import CONFIGS


def _config(stem: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / f"{stem}.json").read_text())
    return data


@pytest.mark.parametrize(
    ("stem", "was"),
    [
        ("Jamba-v0.1", "attn_layer_offset"),
        ("bloom", "apply_residual_connection_post_layernorm"),
        ("mamba-2.8b-hf", "conv_kernel"),
    ],
)
def test_unmodelled_model_type_is_refused_before_its_unknown_keys(stem: str, was: str) -> None:
    """These were refused as "unknown key '<was>'" (a did-you-mean at best), which reads as
    a typo to fix; the model type and what its block is say why."""
    kind = _config(stem)["model_type"]
    with pytest.raises(ConfigError, match=rf"model_type '{kind}' means .*not model") as err:
        load_model(CONFIGS / f"{stem}.json")
    assert was not in str(err.value)


def test_gemma_reads_as_geglu_tied_with_its_head_dim() -> None:
    """google/gemma-7b was refused ("a gated gelu MLP is not modelled"), and the family
    table said untied: GemmaMLP is down(gelu_tanh(gate) * up) — SwiGLU's GEMMs and bytes —
    and GemmaConfig ties the output layer by default; head_dim 256, not 3072 / 16."""
    spec = load_model(CONFIGS / "gemma-7b.json")
    assert (spec.mlp, spec.gated, spec.tied_embeddings, spec.head_dim) == (
        Mlp.GEGLU, True, True, 256,
    )  # fmt: skip
    assert spec.params() == pytest.approx(8.54e9, rel=0.002)  # the Hub's 8,537,680,896
    unnamed = {k: v for k, v in _config("gemma-2b").items() if k != "hidden_act"}
    assert model_from_dict(unnamed, "gemma").mlp is Mlp.GEGLU  # GemmaConfig's default act


def test_nemo_geglu_activation_is_gated() -> None:
    """A Megatron / NeMo mapping with `activation: geglu` (or fast-geglu) was read as a
    plain GeLU MLP: one up projection instead of two, a third of the MLP weights missing."""
    args = {**cfg.MEGATRON_LLAMA3_8B, "swiglu": None, "activation": "fast-geglu"}
    spec = model_from_dict(args, "nemo")
    assert spec.mlp is Mlp.GEGLU and spec.gated
    assert spec.layer_params() == load_model("llama3-8b").layer_params()
    # Megatron's `--gated-linear-unit` alone (GeLU, its default activation) was plain GeLU too
    glu = model_from_dict({**cfg.MEGATRON_GPT3_175B, "gated_linear_unit": True}, "megatron")
    assert glu.mlp is Mlp.GEGLU


def test_phi3_sliding_window_covers_every_layer() -> None:
    """microsoft/Phi-3-mini-4k-instruct was refused ("unknown key
    'original_max_position_embeddings'"): a Llama-shaped block (fused QKV and gate/up, the
    same GEMMs) whose `sliding_window` 2047 Phi3Model applies to every layer."""
    spec = load_model(CONFIGS / "Phi-3-mini-4k-instruct.json")
    assert (spec.mlp, spec.head_dim, spec.window, spec.window_every) == (Mlp.SWIGLU, 96, 2047, 1)
    phi4 = load_model(CONFIGS / "Phi-4-mini-instruct.json")  # full_attn_mod, lm_head_bias
    assert (phi4.kv_heads, phi4.tied_embeddings) == (8, True)


def test_qwen25_use_mrope_false_is_not_an_unknown_key() -> None:
    """Qwen/Qwen2.5-7B's config.json has `use_mrope: false` (the multimodal RoPE of
    Qwen2-VL, off); it was "unknown key 'use_mrope'; did you mean 'qk_rope'?"."""
    spec = load_model(CONFIGS / "Qwen2.5-7B.json")
    assert spec.params() == load_model(CONFIGS / "Qwen2-7B.json").params()


def test_private_transformers_keys_are_ignored() -> None:
    """transformers writes private attributes into saved configs (`_attn_implementation`
    in google/gemma-2-27b's); "unknown key '_attn_implementation'" refused the file."""
    extra = {"_attn_implementation": "eager", "_commit_hash": None, "_from_model_config": True}
    spec = model_from_dict({**cfg.LLAMA31_8B, **extra}, "llama")
    assert spec.params() == load_model("llama3.1-8b").params()


def test_starcoder2_gelu_names_of_one_kind_agree_and_it_is_tied() -> None:
    """bigcode/starcoder2-7b names its activation twice (hidden_act gelu_pytorch_tanh,
    activation_function gelu): one kind, no disagreement; every linear biased
    (`use_bias`), LayerNorm, its 4096-key window on every layer, tied (7.17 B)."""
    spec = load_model(CONFIGS / "starcoder2-7b.json")
    assert (spec.mlp, spec.norm.value, spec.bias, spec.window, spec.window_every) == (
        Mlp.GELU, "layernorm", True, 4096, 1,
    )  # fmt: skip
    assert spec.tied_embeddings and spec.params() / 1e9 == pytest.approx(7.17, rel=0.01)
    with pytest.raises(ConfigError, match=r"'hidden_act' \('silu'\) and 'activation_function'"):
        model_from_dict({**_config("starcoder2-7b"), "hidden_act": "silu"}, "sc2")


@pytest.mark.parametrize(
    ("stem", "norm"),
    [
        ("OLMo-7B-hf", "layernorm"),  # weightless LayerNorm, clip_qkv
        ("OLMo-2-1124-7B", "rmsnorm"),  # norms after attention / MLP, QK-norm
        ("granite-3.0-8b-base", "rmsnorm"),  # scalar multipliers
        ("deepseek-moe-16b-base", "rmsnorm"),  # model_type deepseek
    ],
)
def test_plain_decoder_families_are_read(stem: str, norm: str) -> None:
    """Refused before (unknown model type or an unknown no-cost key); each is a SwiGLU
    decoder whose differences cost next to nothing (`hf_families` module doc)."""
    spec = load_model(CONFIGS / f"{stem}.json")
    assert (spec.mlp, spec.norm.value, spec.bias) == (Mlp.SWIGLU, norm, False)


def test_multimodal_wrapper_reads_as_its_text_config() -> None:
    """Llama 4's config.json is a wrapper (`text_config`, `vision_config`): refused before
    ("give its text_config as the file"); now read as its text model, the same spec as the
    text_config given alone (`hf_wrappers.unwrap`)."""
    wrapper = load_model(CONFIGS / "Llama-4-Scout-17B-16E.json")
    text = json.loads((CONFIGS / "Llama-4-Scout-17B-16E.json").read_text())["text_config"]
    alone = model_from_dict({**text, "tie_word_embeddings": False}, "text", wrapper.name)
    assert wrapper == alone
    assert (wrapper.experts, wrapper.top_k, wrapper.layers) == (16, 1, 48)


def test_layer_types_must_name_every_layer() -> None:
    """A `layer_types` list shorter than the layers was accepted, its missing entries
    silently full attention."""
    short = {**cfg.QWEN3_30B_A3B, "layer_types": ["full_attention"] * 3}
    with pytest.raises(ConfigError, match="'layer_types' has 3 entries for 48 layers"):
        model_from_dict(short, "qwen")
