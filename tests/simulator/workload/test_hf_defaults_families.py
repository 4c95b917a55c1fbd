"""Class defaults for the families that needed every shape key (`hf_defaults`: GPT-J, Phi,
Cohere, DeepSeek-V2, OPT, GPT-2, StableLM, GLM-4, Granite), Phi-1.5 / 2's `phi-msft`
layout, and the missing-key refusal of a config.json naming its model type and the key.

Real files: `tests/data/model_configs` (sources in its SOURCES.md)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from lumos.api import estimate
from lumos.errors import ConfigError
from lumos.simulator.workload.spec import Mlp, Norm, load_model, model_from_dict
from tests.conftest import script_module
from tests.simulator.workload.model_battery import CONFIGS

#: file -> keys whose value there is its class's default (hf_defaults names the class)
STRIPPED = {
    "gpt-j-6b.json": ("vocab_size", "n_embd", "n_layer", "n_head"),
    "c4ai-command-r-v01.json": (
        "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads",
    ),
    "GLM-4-9B-0414.json": (
        "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "head_dim",
    ),
    "opt-66b.json": ("vocab_size", "max_position_embeddings"),
    "gpt2-medium.json": ("vocab_size", "n_positions"),
    "granite-3.0-8b-base.json": ("hidden_size", "num_attention_heads"),
    "DeepSeek-V2-Lite.json": (
        "kv_lora_rank", "n_routed_experts", "n_shared_experts", "qk_nope_head_dim",
        "qk_rope_head_dim", "v_head_dim",
    ),
}  # fmt: skip


def _read(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / name).read_text())
    return data


@pytest.mark.parametrize("name", sorted(STRIPPED))
def test_a_family_config_without_its_default_keys_reads_to_the_full_count(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Each removed key held its class default: the stripped file is the same model (weights,
    layers, heads, KV heads, the learned table's rows, MLA ranks), and the note names every
    key it filled with the transformers commit it was read at."""
    full = load_model(CONFIGS / name)
    stripped = {k: v for k, v in _read(name).items() if k not in STRIPPED[name]}
    with caplog.at_level(logging.WARNING):
        spec = model_from_dict(stripped, name)
    assert spec.params() == full.params()
    assert (spec.layers, spec.heads, spec.kv_heads, spec.seq, spec.kv_lora, spec.q_lora) == (
        full.layers, full.heads, full.kv_heads, full.seq, full.kv_lora, full.q_lora,
    )  # fmt: skip
    note = next(r.getMessage() for r in caplog.records if "leaves out" in r.getMessage())
    assert all(f"{key}=" in note for key in STRIPPED[name])
    assert "huggingface/transformers @ " in note


@pytest.mark.parametrize(
    ("kind", "published"),
    [
        # published totals written from memory (Hub model pages / cards), not re-read here
        ("gptj", 6_053_381_344),  # EleutherAI/gpt-j-6b card; -0.05 %, 0.6 M of it biases
        ("phi", 1_418_270_720),  # microsoft/phi-1 (Hub): lumos leaves out lm_head's bias
        ("cohere", 35.0e9),  # c4ai-command-r-v01 card, "35 billion"
        ("opt", 125_239_296),  # facebook/opt-125m: OPT's position table has 2 more rows
        ("gpt2", 124_439_808),  # openai-community/gpt2
        ("stablelm", 2_795_443_200),  # stabilityai/stablelm-3b-4e1t card
        ("glm4", 9.4e9),  # THUDM/GLM-4-9B-0414 card
    ],
)
def test_a_bare_family_model_type_is_its_class_default_model(kind: str, published: float) -> None:
    """`{"model_type": kind}` alone is the checkpoint its config class describes: within
    0.1 % of that checkpoint's published size (the differences named above are biases
    and rows lumos does not count)."""
    params = model_from_dict({"model_type": kind}, "bare.json").params()
    assert params == pytest.approx(published, rel=1e-3)


def test_bare_gpt2_and_opt_take_their_learned_tables_rows_as_seq() -> None:
    """GPT-2's 1024 and OPT's 2048 position rows are defaults too: the learned table's
    rows are what the model runs at."""
    gpt2 = model_from_dict({"model_type": "gpt2"}, "g.json")
    opt = model_from_dict({"model_type": "opt"}, "o.json")
    assert (gpt2.position, gpt2.seq, opt.position, opt.seq) == ("learned", 1024, "learned", 2048)
    mpe = model_from_dict({"model_type": "gpt2", "max_position_embeddings": 512}, "m.json")
    assert mpe.seq == 512  # GPT-2's attribute_map: the same key, not filled beside it


def test_deepseek_v2_default_keeps_an_absent_q_lora_rank_unprojected() -> None:
    """DeepseekV2Config's q_lora_rank 1536 is not filled (hf_defaults doc): MLC's copy of
    DeepSeek-V2-Lite drops its `q_lora_rank: null`, and the file still reads to the card's
    15.7 B; a file with no top-k is refused (DeepseekV2Config's default is None)."""
    lite = load_model(CONFIGS / "DeepSeek-V2-Lite.json")
    assert lite.q_lora == 0 and lite.kv_lora == 512
    assert lite.params() / 1e9 == pytest.approx(15.7, rel=2e-3)
    with pytest.raises(ConfigError, match="top_k"):
        model_from_dict({"model_type": "deepseek_v2"}, "d.json")


@pytest.mark.parametrize(
    ("stem", "published"),
    [
        # Hub model pages' totals, from memory: lumos leaves out lm_head's 51,200 biases
        ("phi-1_5", 1_418_270_720),
        ("phi-2", 2_779_683_840),
    ],
)
def test_phi_msft_layout_reads_as_transformers_phi(stem: str, published: int) -> None:
    """Phi-1.5 / 2's first remote-code files (`phi-msft`) were "not one lumos knows": the
    checkpoints load into transformers' PhiForCausalLM by renames only, so the block is
    `phi`'s — attention and MLP in parallel on one LayerNorm, every linear biased, GeLU
    4x, untied; the count is one made by hand from the file less lm_head's bias."""
    spec = load_model(CONFIGS / f"{stem}.json")
    h, layers, vocab = spec.hidden, spec.layers, spec.vocab
    per_layer = 4 * h * h + 4 * h + 2 * 4 * h * h + 4 * h + h + 2 * h
    assert spec.params() == layers * per_layer + 2 * h + 2 * vocab * h == published - vocab
    assert (spec.parallel_block, spec.parallel_norms, spec.bias) == (True, 1, True)
    assert (spec.mlp, spec.norm, spec.tied_embeddings, spec.kv_heads) == (
        Mlp.GELU, Norm.LAYERNORM, False, spec.heads,
    )  # fmt: skip
    same = {"model_type": "phi", "hidden_size": h, "num_hidden_layers": layers,
            "num_attention_heads": spec.heads, "vocab_size": vocab, "intermediate_size": 4 * h}  # fmt: skip
    assert model_from_dict(same, "phi.json").params() == spec.params()


def test_phi_msft_with_a_vision_tower_is_refused_naming_it() -> None:
    data = {**_read("phi-2.json"), "img_processor": {"name": "clip_vision_model"}}
    with pytest.raises(ConfigError, match="'phi-msft' with an 'img_processor'"):
        model_from_dict(data, "phi-v.json")


def test_missing_shape_key_names_the_file_model_type_and_key(tmp_path: Path) -> None:
    """A config.json whose model type has no class defaults here (EXAONE's remote code) and
    leaves out its depth: refused naming the file, 'exaone' and the key by the config's
    names, not only lumos' 'layers'; one whose class defaults lack a key the same way."""
    data = {k: v for k, v in _read("EXAONE-3.5-7.8B-Instruct.json").items() if k != "num_layers"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as err:
        load_model(path)
    message = str(err.value)
    assert message.startswith(f"{path}: model_type 'exaone' leaves out ")
    assert "'num_hidden_layers' / 'n_layer' / 'num_layers' (lumos' 'layers')" in message
    assert "no config-class defaults" in message


def test_a_filled_family_estimates_like_its_full_file(tmp_path: Path) -> None:
    """End to end: GPT-J with its default-valued shape keys removed steps exactly as the
    full file does (same step time and memory)."""
    stripped = {k: v for k, v in _read("gpt-j-6b.json").items()
                if k not in STRIPPED["gpt-j-6b.json"]}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(stripped))
    plan = {"tp": 2, "dp": 4, "gbs": 8, "seq": 2048}
    full = estimate(CONFIGS / "gpt-j-6b.json", hw="h100", **plan).to_json()
    filled = estimate(path, hw="h100", **plan).to_json()
    assert full["fits_in_memory"] and 0 < full["mfu"] < 0.8
    assert filled["iteration_time_s"] == full["iteration_time_s"]
    assert filled["memory_gb_per_gpu"] == full["memory_gb_per_gpu"]


def _chatglm3() -> dict[str, Any]:
    return _read("chatglm3-6b.json")


def test_chatglm_reads_as_transformers_glm_block() -> None:
    """ChatGLM3-6B was refused ("GLM's own block"): it is transformers' GLM block under
    Megatron-style names — SwiGLU `ffn_hidden_size` wide, RMSNorm, 2 key/value groups of
    `kv_channels`, q/k/v biased only, untied, `seq_length` a context limit (not the
    training length). The count equals the one of the GlmConfig transformers'
    convert_glm_weights_to_hf.py makes of the file, and one by hand less the q/k/v biases
    (4,608 a layer); published 6.24 B (Hub page, from memory)."""
    spec = load_model(CONFIGS / "chatglm3-6b.json")
    assert (spec.layers, spec.hidden, spec.heads, spec.kv_heads, spec.head_dim) == (
        28, 4096, 32, 2, 128,
    )  # fmt: skip
    assert (spec.ffn, spec.vocab, spec.mlp, spec.norm, spec.bias) == (
        13696, 65024, Mlp.SWIGLU, Norm.RMSNORM, False,
    )  # fmt: skip
    assert (spec.tied_embeddings, spec.seq, spec.position) == (False, 2048, "rope")
    cfg = _chatglm3()
    glm = {"model_type": "glm", "vocab_size": cfg["padded_vocab_size"],
           "hidden_size": cfg["hidden_size"], "intermediate_size": cfg["ffn_hidden_size"],
           "num_hidden_layers": cfg["num_layers"], "num_attention_heads": 32,
           "num_key_value_heads": cfg["multi_query_group_num"], "head_dim": cfg["kv_channels"],
           "max_position_embeddings": cfg["seq_length"], "rms_norm_eps": 1e-5,
           "attention_bias": cfg["add_qkv_bias"]}  # fmt: skip
    assert model_from_dict(glm, "glm.json").params() == spec.params()
    h, d, ffn = 4096, 128, 13696
    layer = h * 32 * d + 2 * h * 2 * d + 32 * d * h + 3 * h * ffn + 2 * h
    assert spec.params() == 28 * layer + h + 2 * 65024 * h == 6_243_454_976
    assert (spec.params() + 28 * 4608) / 1e9 == pytest.approx(6.24, rel=1e-3)


@pytest.mark.parametrize(
    ("key", "value", "what"),
    [
        ("rmsnorm", False, "LayerNorms"),
        ("add_bias_linear", True, "biases on the attention output and the MLP"),
        ("apply_residual_connection_post_layernorm", True, "residual taken after the norm"),
        ("pre_seq_len", 128, "P-tuning prefix encoder"),
    ],
)
def test_chatglm_variants_glm_cannot_hold_are_refused(key: str, value: object, what: str) -> None:
    with pytest.raises(ConfigError, match=f"'chatglm' with '{key}'.*{what}"):
        model_from_dict({**_chatglm3(), key: value}, "glm-variant.json")


def test_chatglm_without_grouped_attention_has_a_key_value_head_per_head() -> None:
    """ChatGLMConfig's `multi_query_attention` false: every head its own keys and values
    (the converter's `num_key_value_heads = num_attention_heads`)."""
    spec = model_from_dict({**_chatglm3(), "multi_query_attention": False}, "mha.json")
    assert spec.kv_heads == spec.heads == 32


def test_sweep_script_reports_estimated_and_refused_with_reasons(tmp_path: Path) -> None:
    """scripts/sweep_configs.py over three real files: phi-2 estimated (its count, a TP that
    fits), bloom refused naming its block, and a config.json without its depth refused
    naming the key; the JSON rows say so and a crash-free run exits 0."""
    sweep = script_module("sweep_configs")
    data = {k: v for k, v in _read("EXAONE-3.5-7.8B-Instruct.json").items() if k != "num_layers"}
    broken = tmp_path / "exaone-no-layers.json"
    broken.write_text(json.dumps(data))
    out = tmp_path / "rows.json"
    files = [CONFIGS / "phi-2.json", CONFIGS / "bloom.json", broken]
    assert sweep.main([*map(str, files), "--json", str(out)]) == 0
    rows = {r["file"]: r for r in json.loads(out.read_text())}
    phi = rows["phi-2.json"]
    assert (phi["outcome"], phi["params_b"], phi["fits"]) == ("estimated", 2.78, True)
    assert rows["bloom.json"]["outcome"] == "refused"
    assert "model_type 'bloom' means ALiBi" in rows["bloom.json"]["reason"]
    assert rows[broken.name]["reason"].startswith("model_type 'exaone' leaves out ")
