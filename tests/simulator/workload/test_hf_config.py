"""Real models' config.json files (Hugging Face, Megatron-LM arguments) read as model specs:
the same spec and parameter count as lumos' built-in where it has one, published totals
within 1 %, unmodelled architectures and bad JSON refused naming the key and the file, and
`lumos estimate --model config.json` giving the built-in's step time."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.errors import ConfigError
from lumos.simulator.workload.spec import ModelSpec, load_model, model_from_dict
from tests.simulator.workload import hf_configs as cfg


def _write(tmp_path: Path, folder: str, config: dict[str, Any]) -> Path:
    path = tmp_path / folder / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))
    return path


def _shape(spec: ModelSpec, seq: bool = False) -> dict[str, Any]:
    """Every field but the name (and the sequence: a config.json holds no training one)."""
    out = dataclasses.asdict(spec)
    out.pop("name")
    if not seq:
        out.pop("seq")
    return out


SAME_AS_BUILTIN = [
    ("Llama-3.1-8B", cfg.LLAMA31_8B, "llama3.1-8b"),
    ("Llama-3.1-70B", cfg.LLAMA31_70B, "llama3.1-70b"),
    ("Llama-3.3-70B-Instruct", cfg.LLAMA33_70B, "llama3.1-70b"),
    ("Llama-3.1-405B", cfg.LLAMA31_405B, "llama3.1-405b"),
    ("Mixtral-8x7B-v0.1", cfg.MIXTRAL_8X7B, "mixtral-8x7b"),
    ("Mixtral-8x22B-v0.1", cfg.MIXTRAL_8X22B, "mixtral-8x22b"),
    ("DeepSeek-V3", cfg.DEEPSEEK_V3, "deepseek-v3"),
    ("Qwen3-30B-A3B", cfg.QWEN3_30B_A3B, "qwen3-30b-a3b"),
    ("gpt-oss-120b", cfg.GPT_OSS_120B, "gpt-oss-120b"),
    ("gpt-oss-20b", cfg.GPT_OSS_20B, "gpt-oss-20b"),
]


@pytest.mark.parametrize(("folder", "config", "builtin"), SAME_AS_BUILTIN)
def test_config_json_equals_the_builtin(
    tmp_path: Path, folder: str, config: dict[str, Any], builtin: str
) -> None:
    spec = load_model(_write(tmp_path, folder, config))
    ref = load_model(builtin)
    assert spec.name == folder  # the download's folder names the model
    assert _shape(spec) == _shape(ref)
    assert spec.params() == ref.params() and spec.params(True) == ref.params(True)
    assert spec.seq == 2048  # max_position_embeddings is the context limit, not the seq


MEGATRON = [
    (cfg.MEGATRON_GPT3_175B, "gpt3-175b"),
    (cfg.MEGATRON_LLAMA3_8B, "llama3-8b"),
    (cfg.MEGATRON_NEMOTRON4_15B, "nemotron4-15b"),
]


@pytest.mark.parametrize(("args", "builtin"), MEGATRON, ids=[b for _, b in MEGATRON])
def test_megatron_arguments_equal_the_builtin(args: dict[str, Any], builtin: str) -> None:
    """Megatron-LM argument names, with Megatron's defaults for what they leave out (GPT-3:
    learned positions, LayerNorm, GeLU, biases, tied; vocabulary padded to 51,200); their
    `seq_length` is the training sequence."""
    spec = model_from_dict(dict(args), "megatron")
    assert _shape(spec, seq=True) == _shape(load_model(builtin), seq=True)


# published totals, billions: model cards (Llama 3.1, Qwen2.5 72.7B, Mistral 7.24B,
# Mistral-NeMo 12.2B, Mixtral 46.7 / 141, DeepSeek-V3 671, Qwen3 30.5, gpt-oss 116.8 as
# test_moe), GPT-2 124M (124,439,808 weights as transformers counts them)
PUBLISHED = [
    ("Llama-3.1-8B", cfg.LLAMA31_8B, 8.03),
    ("Llama-3.1-70B", cfg.LLAMA31_70B, 70.6),
    ("Llama-3.1-405B", cfg.LLAMA31_405B, 405.9),
    ("Qwen2.5-72B", cfg.QWEN25_72B, 72.7),
    ("Mistral-7B-v0.1", cfg.MISTRAL_7B, 7.24),
    ("Mistral-Nemo-Base-2407", cfg.MISTRAL_NEMO, 12.2),
    ("Mixtral-8x7B-v0.1", cfg.MIXTRAL_8X7B, 46.7),
    ("Mixtral-8x22B-v0.1", cfg.MIXTRAL_8X22B, 141.0),
    ("DeepSeek-V3", cfg.DEEPSEEK_V3, 671.0),
    ("Qwen3-30B-A3B", cfg.QWEN3_30B_A3B, 30.5),
    ("gpt-oss-120b", cfg.GPT_OSS_120B, 116.8),
    ("gpt2", cfg.GPT2, 0.124),
]


@pytest.mark.parametrize(("folder", "config", "billions"), PUBLISHED)
def test_parameter_counts_match_published_within_1_percent(
    tmp_path: Path, folder: str, config: dict[str, Any], billions: float
) -> None:
    spec = load_model(_write(tmp_path, folder, config))
    assert spec.params() / 1e9 == pytest.approx(billions, rel=0.01)


def test_gpt2_is_learned_tied_biased_and_counts_exactly() -> None:
    """GPT-2: gelu_new ungated, LayerNorm, all linear biases, learned positions (n_positions
    rows, the spec's seq), tied: 124,439,808 weights, transformers' count."""
    spec = model_from_dict(dict(cfg.GPT2), "gpt2")
    assert (spec.mlp.value, spec.norm.value, spec.position) == ("gelu", "layernorm", "learned")
    assert (spec.bias, spec.tied_embeddings, spec.seq, spec.ffn) == (True, True, 1024, 3072)
    assert spec.params() == 124_439_808


def test_qwen2_qkv_bias_is_not_lumos_bias_and_sliding_window_is_off() -> None:
    """Qwen2.5-72B: QKV bias only (lumos' `bias` is every linear's), use_sliding_window
    false leaves its sliding_window 131072 unused."""
    spec = model_from_dict(dict(cfg.QWEN25_72B), "qwen")
    assert (spec.bias, spec.window, spec.mlp.value, spec.norm.value) == (
        False, 0, "swiglu", "rmsnorm",
    )  # fmt: skip


def test_mistral_sliding_window_covers_every_layer_and_nemo_head_dim() -> None:
    """Mistral-7B-v0.1's sliding_window 4096 applies to every layer (no layer_types), as in
    the built-in `mistral-7b` (which left it out until it defaulted to seq 8192 with full
    attention); Mistral-NeMo's head_dim 128 is not hidden / heads (160)."""
    spec = model_from_dict(dict(cfg.MISTRAL_7B), "mistral")
    assert (spec.window, spec.window_every) == (4096, 1)
    assert _shape(spec) == _shape(load_model("mistral-7b"))
    nemo = model_from_dict(dict(cfg.MISTRAL_NEMO), "nemo")
    assert (nemo.head_dim, nemo.window) == (128, 0)
    assert _shape(nemo) == _shape(load_model("mistral-nemo-12b"))
    qwen = model_from_dict(dict(cfg.QWEN25_72B), "qwen")
    assert _shape(qwen) == _shape(load_model("qwen2.5-72b"))


def test_deepseek_v3_active_parameters() -> None:
    """36.6B activated counting the output head, not the input embedding (test_mla)."""
    ds = model_from_dict(dict(cfg.DEEPSEEK_V3), "ds")
    assert ds.params(active=True) - ds.vocab * ds.hidden == pytest.approx(36.6e9, rel=0.01)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({**cfg.FALCON_7B, "alibi": True}, "alibi"),
        ({**cfg.FALCON_7B, "apply_residual_connection_post_layernorm": True}, "post_layernorm"),
        ({**cfg.QWEN25_72B, "use_sliding_window": True}, "use_sliding_window"),
        ({"model_type": "t5", "is_encoder_decoder": True, "d_model": 512}, "is_encoder_decoder"),
        ({**cfg.LLAMA31_8B, "vision_config": {"hidden_size": 1280}}, "vision_config"),
        ({"model_type": "mllama", "text_config": cfg.LLAMA31_8B}, "text_config"),
        ({**cfg.QWEN3_30B_A3B, "mlp_only_layers": [0, 47]}, "mlp_only_layers"),
        (
            {**cfg.GPT_OSS_120B, "layer_types": ["sliding_attention"] * 2 + ["full_attention"]},
            "layer_types",
        ),
        (
            {**cfg.LLAMA31_8B, "model_type": "cohere2"},
            "model_type 'cohere2' means Command R7B's sliding-window layer pattern",
        ),
        ({**cfg.LLAMA31_8B, "hidden_act": "tanh"}, "activation 'tanh'"),
        ({**cfg.LLAMA31_8B, "hidden_act": "relu"}, "gated relu"),
        ({**cfg.MEGATRON_LLAMA3_8B, "position_embedding_type": "none"}, "position_embedding"),
    ],
)
def test_unmodelled_keys_are_refused_naming_key_and_file(
    tmp_path: Path, config: dict[str, Any], key: str
) -> None:
    path = _write(tmp_path, "m", config)
    with pytest.raises(ConfigError, match=rf"{path}: .*{key}"):
        load_model(path)


def test_unknown_hf_key_says_did_you_mean(tmp_path: Path) -> None:
    path = _write(tmp_path, "m", {**cfg.LLAMA31_8B, "num_hiden_layers": 2})
    with pytest.raises(ConfigError, match=r"unknown key 'num_hiden_layers'; did you mean "
                       r"'num_hidden_layers'"):  # fmt: skip
        load_model(path)


def test_names_that_disagree_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"'num_hidden_layers' \(32\) and 'n_layer' \(12\)"):
        model_from_dict({**cfg.LLAMA31_8B, "n_layer": 12}, "x")


def test_bad_json_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 4096,, }')
    with pytest.raises(ConfigError, match=rf"{path}: invalid JSON"):
        load_model(path)
    path.write_text("[1, 2]")
    with pytest.raises(ConfigError, match=rf"{path}: expected a mapping"):
        load_model(path)


def test_config_json_in_the_cwd_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--model config.json` (no "/") was read as a built-in name and refused."""
    (tmp_path / "config.json").write_bytes(orjson.dumps(cfg.LLAMA31_8B))
    monkeypatch.chdir(tmp_path)
    assert load_model("config.json").params() == load_model("llama3.1-8b").params()
    with pytest.raises(ConfigError, match=r"missing\.json: no such model spec file"):
        load_model("missing.json")


def test_estimate_config_json_equals_the_builtin_step_time(tmp_path: Path) -> None:
    """End to end: `lumos estimate --model config.json --json` on an H100 plan gives the
    built-in's iteration time (the config's seq comes from --seq)."""
    path = _write(tmp_path, "Llama-3.1-8B", cfg.LLAMA31_8B)
    plan = ["--tp", "2", "--pp", "2", "--dp", "2", "--gbs", "8", "--seq", "2048"]
    times = []
    for model in (str(path), "llama3.1-8b"):
        args = ["estimate", "--model", model, *plan, "--hw", "h100", "--json"]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        times.append(json.loads(result.output)["result"]["iteration_time_s"])
    assert times[0] == times[1] > 0


def test_hub_download_folder_reads_its_config_json(tmp_path: Path) -> None:
    """`--model ~/hf/Llama-3.1-8B` (the folder a Hugging Face download makes) was refused
    as "is a folder, not a model spec file"; it reads the config.json inside, named after
    the folder."""
    path = _write(tmp_path, "Llama-3.1-8B", cfg.LLAMA31_8B)
    spec = load_model(path.parent)
    assert spec.name == "Llama-3.1-8B" and spec.params() == load_model("llama3.1-8b").params()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="is a folder"):
        load_model(empty)
