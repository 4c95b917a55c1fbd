"""Configs that spell their shape their own way (`hf_layouts`): DBRX's nested configs,
Llama 4's text model, OPT — each refused before as an unknown key or model type."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from lumos.errors import ConfigError
from lumos.simulator.workload.spec import Mlp, load_model, model_from_dict
from tests.simulator.workload.model_battery import CONFIGS


def _config(stem: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / f"{stem}.json").read_text())
    return data


def test_dbrx_nested_config_reads_as_16_experts_top_4() -> None:
    """databricks/dbrx-base ("unknown key 'attn_config'"): d_model 6144, 48 heads, 8 KV
    heads in attn_config, 16 GLU experts of 10752 picking 4 in ffn_config; 132 B, 36 B
    active as Databricks states."""
    spec = load_model(CONFIGS / "dbrx-base.json")
    shape = (spec.hidden, spec.heads, spec.kv_heads, spec.experts, spec.top_k, spec.moe_ffn)
    assert shape == (6144, 48, 8, 16, 4, 10752)
    assert (spec.mlp, spec.norm.value, spec.moe_layers) == (Mlp.SWIGLU, "layernorm", 40)
    assert spec.params() / 1e9 == pytest.approx(132, rel=0.01)
    assert spec.params(active=True) / 1e9 == pytest.approx(36, rel=0.02)


@pytest.mark.parametrize(("step", "builtin"), [(1, "llama4-scout"), (2, "llama4-maverick")])
def test_llama4_text_config_equals_the_builtin(step: int, builtin: str) -> None:
    """Llama 4's text_config (model_type llama4_text, refused as unknown): experts and the
    shared expert `intermediate_size` wide, dense layers `intermediate_size_mlp`, every
    `interleave_moe_layer_step`-th layer MoE from layer step - 1, attention chunk 8192."""
    text = _config("Llama-4-Scout-17B-16E")["text_config"]
    if step == 2:
        text = {**text, "interleave_moe_layer_step": 2, "num_local_experts": 128}
    spec = model_from_dict(text, "llama4")
    ref = load_model(builtin)
    mine, theirs = dataclasses.asdict(spec), dataclasses.asdict(ref)
    for key in ("name", "seq"):
        mine.pop(key), theirs.pop(key)
    assert mine == theirs and spec.chunk == 8192


def test_llama4_moe_layers_other_than_the_interleave_are_refused() -> None:
    text = {**_config("Llama-4-Scout-17B-16E")["text_config"], "moe_layers": [0, 5, 9]}
    with pytest.raises(ConfigError, match="'moe_layers' other than every"):
        model_from_dict(text, "llama4")


def test_opt_reads_relu_learned_tied_biased() -> None:
    """facebook/opt-66b ("unknown key 'activation_dropout'"): ReLU fc1 / fc2 (priced as the
    ungated GeLU MLP), `ffn_dim`, biases, LayerNorm, learned positions (2048 rows: the
    spec's seq), tied output layer."""
    spec = load_model(CONFIGS / "opt-66b.json")
    assert (spec.mlp, spec.gated, spec.ffn, spec.bias, spec.norm.value) == (
        Mlp.RELU, False, 36864, True, "layernorm",
    )  # fmt: skip
    assert (spec.position, spec.seq, spec.tied_embeddings) == ("learned", 2048, True)
    assert spec.params() / 1e9 == pytest.approx(66, rel=0.01)


@pytest.mark.parametrize(
    ("patch", "key"),
    [
        ({"word_embed_proj_dim": 512}, "word_embed_proj_dim"),
        ({"do_layer_norm_before": False}, "do_layer_norm_before"),
        ({"layerdrop": 0.1}, "layerdrop"),
    ],
)
def test_opt_350m_projection_post_ln_and_layerdrop_are_refused(
    patch: dict[str, Any], key: str
) -> None:
    with pytest.raises(ConfigError, match=rf"opt: '{key}'"):
        model_from_dict({**_config("opt-66b"), **patch}, "opt")
