"""A config.json that leaves out the keys equal to its config class's defaults reads as
transformers builds it (`hf_defaults.DEFAULTS`): real configs (`tests/data/model_configs`,
sources in its SOURCES.md) with those keys removed read to the full file's count, the
defaults filled are logged, a key the file names wins, and an unknown model type is still
refused by name."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from lumos.errors import ConfigError
from lumos.simulator.workload.spec import load_model, model_from_dict
from tests.simulator.workload.model_battery import CONFIGS

#: file -> keys whose value there is its class's default (the class named in hf_defaults)
STRIPPED = {
    "Mistral-7B-v0.3.json": (
        "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads",
    ),
    "Qwen1.5-MoE-A2.7B.json": (
        "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "num_experts", "num_experts_per_tok",
        "moe_intermediate_size", "shared_expert_intermediate_size", "decoder_sparse_step",
    ),
    "Qwen3-8B.json": ("vocab_size", "hidden_size", "num_attention_heads", "head_dim"),
    "Qwen3-235B-A22B.json": (
        "vocab_size", "num_key_value_heads", "num_experts", "num_experts_per_tok",
        "decoder_sparse_step",
    ),
    "Phi-3-mini-4k-instruct.json": (
        "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads",
    ),
    "gemma-7b.json": (
        "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "head_dim",
    ),
    "gemma-2-2b-it.json": (
        "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "head_dim", "sliding_window",
    ),
    "OLMo-2-1124-7B.json": (
        "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    ),
    "falcon-40b.json": ("vocab_size", "multi_query"),
    "starcoder2-7b.json": ("vocab_size",),
}  # fmt: skip


def _read(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / name).read_text())
    return data


@pytest.mark.parametrize("name", sorted(STRIPPED))
def test_a_config_without_its_class_default_keys_reads_to_the_full_count(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Each removed key was the class default, so the stripped file is the same model: same
    weights, layers, heads, KV heads and window; the note names every key it filled."""
    full = load_model(CONFIGS / name)
    stripped = {k: v for k, v in _read(name).items() if k not in STRIPPED[name]}
    with caplog.at_level(logging.WARNING):
        spec = model_from_dict(stripped, name)
    assert spec.params() == full.params()
    assert (spec.layers, spec.heads, spec.kv_heads, spec.head_dim, spec.window) == (
        full.layers, full.heads, full.kv_heads, full.head_dim, full.window,
    )  # fmt: skip
    note = next(r.getMessage() for r in caplog.records if "leaves out" in r.getMessage())
    assert all(f"{key}=" in note for key in STRIPPED[name])
    assert "huggingface/transformers @ " in note


@pytest.mark.parametrize(
    ("kind", "billions"),
    [
        # the published sizes below are written from memory (model cards / papers)
        ("deepseek_v3", 671.0),  # DeepSeek-V3's main model (685 B less the 14 B MTP module)
        ("gpt_neox", 20.55),  # GPT-NeoX-20B
        ("mixtral", 46.7),  # Mixtral-8x7B
        ("falcon", 6.92),  # Falcon-7B, one key/value head (`multi_query`)
    ],
)
def test_a_bare_model_type_is_its_class_default_model(kind: str, billions: float) -> None:
    """`{"model_type": kind}` alone is what transformers builds from the class defaults:
    the model each class's defaults describe, within 0.2 % of its published size."""
    params = model_from_dict({"model_type": kind}, "bare.json").params()
    assert params / 1e9 == pytest.approx(billions, rel=0.002)


def test_a_key_the_file_names_wins_over_the_default() -> None:
    """null is a value: DeepSeek's `q_lora_rank: null` (unprojected queries, V2-Lite's) is
    not replaced by V3's 1536, nor Mistral's `sliding_window: null` by 4096; Qwen3's
    explicit head size beats the default 128."""
    mla = model_from_dict({"model_type": "deepseek_v3", "q_lora_rank": None}, "a.json")
    assert mla.q_lora == 0
    assert mla.params() > model_from_dict({"model_type": "deepseek_v3"}, "b.json").params()
    no_window = model_from_dict({"model_type": "mistral", "sliding_window": None}, "c.json")
    assert (no_window.window, model_from_dict({"model_type": "mistral"}, "d.json").window) == (
        0,
        4096,
    )
    assert model_from_dict({"model_type": "qwen3", "head_dim": 64}, "e.json").head_dim == 64


def test_defaults_yield_to_an_alias_of_the_same_key() -> None:
    """Falcon files name layers and heads `n_layer` / `n_head`; the defaults'
    `num_hidden_layers` / `num_attention_heads` must not be added beside them (they
    would disagree)."""
    spec = model_from_dict({"model_type": "falcon", "n_layer": 2, "n_head": 8}, "f.json")
    assert (spec.layers, spec.heads) == (2, 8)


def test_an_unknown_model_type_without_its_keys_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="model_type 'foo_lm' is not one lumos knows"):
        model_from_dict({"model_type": "foo_lm", "hidden_size": 64}, "foo.json")
