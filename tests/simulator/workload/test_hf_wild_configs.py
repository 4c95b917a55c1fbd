"""Real config.json files that lumos refused or misread before the wild-config sweep
(`tests/data/model_configs`, sources in its SOURCES.md; the sweep's table in
docs/estimate.md): each now reads with the count transformers builds from it, checked
against one made here from the file and the published size."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from lumos.api import estimate
from lumos.errors import ConfigError
from lumos.simulator.workload.spec import Mlp, Norm, load_model, model_from_dict
from tests.simulator.workload.model_battery import CONFIGS


def _gpt2_count(h: int, layers: int, ffn: int, vocab: int, positions: int, kv: int, d: int) -> int:
    """GPT-2 / GPT-BigCode weights: c_attn (q + kv·2 heads, biased), c_proj, c_fc, c_proj
    (biased), two LayerNorms a layer and the final one, token and position tables (tied)."""
    attn = h * (h + 2 * kv * d) + (h + 2 * kv * d) + h * h + h
    mlp = 2 * h * ffn + ffn + h
    return layers * (attn + mlp + 4 * h) + 2 * h + (vocab + positions) * h


def test_gpt2_medium_openai_special_token_keys_are_ignored() -> None:
    """openai-community/gpt2-medium's `n_special` / `predict_special_tokens` (OpenAI GPT's,
    GPT2Config reads neither) were "unknown key 'n_special'; did you mean 'attn_scale'?".
    354,823,168 weights: the model's published 355M."""
    spec = load_model(CONFIGS / "gpt2-medium.json")
    assert spec.params() == _gpt2_count(1024, 24, 4096, 50257, 1024, 16, 64) == 354_823_168


def test_smollm2_conversion_flags_are_ignored() -> None:
    """SmolLM2-360M's `is_llama_config`, `rope_interleaved` and `transformers.js_config`
    (LlamaConfig reads none) were "unknown key"; it is SmolLM-360M's shape: 361.8 M, the
    card's 362M."""
    spec = load_model(CONFIGS / "SmolLM2-360M.json")
    assert spec.params() == load_model(CONFIGS / "SmolLM-360M.json").params() == 361_821_120


def test_gpt_bigcode_reads_as_gpt2_with_one_kv_head() -> None:
    """gpt_bigcode (SantaCoder / StarCoder) was "not one lumos knows": GPT-2's block with one
    key/value head (`multi_query`, GPTBigCodeConfig's default), learned positions, tied;
    1.125 B against SantaCoder's published 1.1B."""
    spec = load_model(CONFIGS / "gpt_bigcode-santacoder.json")
    assert (spec.kv_heads, spec.position, spec.tied_embeddings) == (1, "learned", True)
    assert (spec.mlp, spec.norm, spec.bias) == (Mlp.GELU, Norm.LAYERNORM, True)
    assert spec.params() == _gpt2_count(2048, 24, 8192, 49280, 2048, 1, 128)
    assert spec.params() / 1e9 == pytest.approx(1.1, rel=0.03)
    bare = {"model_type": "gpt_bigcode", "n_embd": 256, "n_layer": 2, "n_head": 4,
            "vocab_size": 512, "n_positions": 128}  # fmt: skip
    assert model_from_dict(bare, "bare.json").kv_heads == 1  # multi_query left out: true


def test_internlm_v1_bias_is_attention_only() -> None:
    """InternLM-7B (v1) was "not one lumos knows": Llama's block with q/k/v/o biased by its
    `bias` key and no MLP bias (modeling_internlm.py), so lumos' GPT-style `bias` stays off;
    7.32 B with its 0.5 M attention biases, which lumos does not count (hf_spec doc)."""
    spec = load_model(CONFIGS / "internlm-7b.json")
    assert not spec.bias and spec.mlp is Mlp.SWIGLU
    h, ffn, vocab, layers = 4096, 11008, 103168, 32
    with_biases = layers * (4 * h * h + 4 * h + 3 * h * ffn + 2 * h) + h + 2 * vocab * h
    assert spec.params() == with_biases - layers * 4 * h == 7_321_423_872


def test_wrappers_price_their_text_model_with_the_class_defaults(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """LLaVA-1.5's text_config names only vocab, norm epsilon and positions; the rest is
    LlamaConfig's default (Llama-2-7B's shape): 6.74 B with its 32,064 tokens. Gemma 3 27B's
    text model is 27.009 B against the Gemma 3 report's 1,416 M embedding + 25,600 M
    non-embedding (its 417 M vision encoder not priced, and the log says so)."""
    with caplog.at_level(logging.WARNING):
        llava = load_model(CONFIGS / "llava-1.5-7b-hf.json")
        gemma = load_model(CONFIGS / "gemma-3-27b-pt.json")
    assert (llava.hidden, llava.layers, llava.ffn, llava.heads, llava.vocab) == (
        4096, 32, 11008, 32, 32064,
    )  # fmt: skip
    assert llava.params() == load_model(CONFIGS / "Llama-2-7b-hf.json").params() + 64 * 4096 * 2
    assert gemma.params() / 1e6 == pytest.approx(1416 + 25600, rel=1e-3)
    notes = [r.getMessage() for r in caplog.records]
    assert any("'llava'" in n and "CLIP vision tower" in n and "not priced" in n for n in notes)
    assert any("'gemma3'" in n and "SigLIP" in n for n in notes)


def test_mistral3_and_qwen_vl_wrappers_read_as_their_text_model() -> None:
    """Mistral-Small-3.1-24B (`mistral3`, a Mistral text_config) and Qwen2.5-VL-7B
    (`qwen2_5_vl`, the text keys at the top level beside `vision_config`) were refused
    (`text_config`, unknown model type): 23.57 B against the card's 24B with its Pixtral
    tower, and exactly Qwen2.5-7B's 7.615 B (the card's 8.29B holds the vision side)."""
    mistral = load_model(CONFIGS / "Mistral-Small-3.1-24B-Instruct-2503.json")
    h, layers, ffn, vocab = 5120, 40, 32768, 131072
    per_layer = 2 * h * 32 * 128 + 2 * h * 8 * 128 + 3 * h * ffn + 2 * h
    assert mistral.params() == layers * per_layer + h + 2 * vocab * h == 23_572_403_200
    qwen_vl = load_model(CONFIGS / "Qwen2.5-VL-7B-Instruct.json")
    assert qwen_vl.params() == load_model(CONFIGS / "Qwen2.5-7B.json").params()
    assert (qwen_vl.layers, qwen_vl.window) == (28, 0)  # use_sliding_window false


def test_a_wrapper_around_an_unknown_text_model_is_refused_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Ministral 3's wrapper holds a `ministral3` text model lumos does not know: refused for
    that model type, and no "priced as its text model" note is logged before it."""
    with caplog.at_level(logging.WARNING), pytest.raises(ConfigError, match="'ministral3'"):
        load_model(CONFIGS / "Ministral-3-3B-Reasoning-2512.json")
    assert not [r for r in caplog.records if "priced as its text model" in r.getMessage()]


def test_a_wrapper_estimates_like_its_text_model(tmp_path: Path) -> None:
    """End to end: the LLaVA wrapper's step equals the one of its Llama text model written
    out with LlamaConfig's defaults."""
    text = json.loads((CONFIGS / "llava-1.5-7b-hf.json").read_text())["text_config"]
    full = {**text, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
            "num_attention_heads": 32, "hidden_act": "silu", "tie_word_embeddings": False}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(full))
    plan = {"tp": 1, "dp": 8, "gbs": 8, "seq": 2048}
    wrapper = estimate(CONFIGS / "llava-1.5-7b-hf.json", hw="h100", **plan).to_json()
    alone = estimate(path, hw="h100", **plan).to_json()
    assert wrapper["fits_in_memory"] and 0 < wrapper["mfu"] < 0.8
    assert wrapper["iteration_time_s"] == alone["iteration_time_s"]
    assert wrapper["memory_gb_per_gpu"] == alone["memory_gb_per_gpu"]
