"""The model-config battery (`model_battery`): every real config.json lumos accepts reads as
the shape its modeling code builds — the parameter count lumos derives matches one counted
here from the config alone (as transformers builds the weights) and the model's published
size — and a published-style plan on H100s gives sane outputs; every config lumos cannot
model is refused naming the file and the key or model type, from the API and the CLI
(exit code 4, one line, nothing written)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from lumos import schemas
from lumos.api import estimate
from lumos.cli.main import cli
from lumos.errors import ConfigError
from lumos.simulator.workload.spec import load_model
from tests.simulator.workload.model_battery import ACCEPTED, CONFIGS, REFUSED, Case

#: model types whose MLP is not gated / whose norms are LayerNorm (weight and bias) /
#: whose linears all have biases / whose output layer is tied unless the config says
_UNGATED = ("opt", "starcoder2", "nemotron", "falcon", "gptj")
_LAYERNORM = ("opt", "starcoder2", "nemotron", "falcon", "gptj")
_BIASED = ("opt", "starcoder2")
_TIED = ("gemma", "gemma2", "gemma3_text", "opt", "starcoder2", "falcon", "cohere")


def _norms(cfg: dict[str, Any]) -> int:
    """Pre-norms a layer builds: one shared by a parallel block's branches (GPTJBlock's
    ln_1, CohereDecoderLayer's input_layernorm, FalconDecoderLayer's input_layernorm
    unless the new decoder architecture gives ln_attn / ln_mlp), else two."""
    kind = cfg["model_type"]
    if kind == "falcon":
        new = cfg.get("new_decoder_architecture")
        return 2 if new and cfg.get("num_ln_in_parallel_attn", 2) == 2 else 1
    return 1 if kind in ("gptj", "cohere", "phi") else 2


def _config(case: Case) -> dict[str, Any]:
    data = json.loads((CONFIGS / f"{case.stem}.json").read_text())
    return data["text_config"] if case.text_config else data


def _path(tmp_path: Path, case: Case) -> Path:
    """The case's config.json (a wrapper's text_config written alone)."""
    if not case.text_config:
        return CONFIGS / f"{case.stem}.json"
    path = tmp_path / case.stem / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_config(case)))
    return path


def _flat(cfg: dict[str, Any]) -> dict[str, Any]:
    """DBRX's names as everyone else's (DbrxConfig: d_model, n_heads, n_layers, nested), and
    GPT-J's (GPTJConfig: n_embd, n_layer, n_head, n_inner, None for 4 x n_embd) and
    Falcon's KV heads (`num_kv_heads` under the new decoder architecture, else one with
    `multi_query`)."""
    if cfg.get("model_type") == "gptj":
        h = cfg["n_embd"]
        return {**cfg, "hidden_size": h, "num_hidden_layers": cfg["n_layer"],
                "num_attention_heads": cfg["n_head"],
                "intermediate_size": cfg["n_inner"] or 4 * h}  # fmt: skip
    if cfg.get("model_type") == "falcon":
        kv = cfg["num_kv_heads"] if cfg.get("new_decoder_architecture") else None
        kv = kv or (1 if cfg.get("multi_query") else cfg["num_attention_heads"])
        ffn = cfg.get("ffn_hidden_size") or 4 * cfg["hidden_size"]
        return {**cfg, "num_key_value_heads": kv, "intermediate_size": ffn}
    if cfg.get("model_type") != "dbrx":
        return cfg
    ffn, attn = cfg["ffn_config"], cfg["attn_config"]
    return {
        **cfg,
        "hidden_size": cfg["d_model"],
        "num_attention_heads": cfg["n_heads"],
        "num_hidden_layers": cfg["n_layers"],
        "num_key_value_heads": attn["kv_n_heads"],
        "num_local_experts": ffn["moe_num_experts"],
        "num_experts_per_tok": ffn["moe_top_k"],
        "moe_intermediate_size": ffn["ffn_hidden_size"],
        "intermediate_size": ffn["ffn_hidden_size"],
    }


def count(raw: dict[str, Any]) -> tuple[int, int]:
    """(all, active) weights of the model `raw` describes, counted as transformers builds
    them (QKV biases, QK-norm weights, OPT's 2 extra position rows, weightless norms
    included), independently of lumos."""
    cfg = _flat(raw)
    kind = cfg["model_type"]
    h, layers, heads = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    d = cfg.get("head_dim") or h // heads
    gated = kind not in _UNGATED
    norm = 0 if kind == "olmo" else h if kind == "dbrx" else 2 * h if kind in _LAYERNORM else h
    if cfg.get("kv_lora_rank"):  # DeepSeek-V2 MLA, queries projected directly (q_lora null)
        nope, rope, v, rank = (cfg[k] for k in ("qk_nope_head_dim", "qk_rope_head_dim",
                                                 "v_head_dim", "kv_lora_rank"))  # fmt: skip
        attn = h * heads * (nope + rope) + h * (rank + rope) + rank
        attn += rank * heads * (nope + v) + heads * v * h
    else:
        attn = h * (heads + 2 * kv) * d + heads * d * h
    if kind in _BIASED:
        attn += (heads + 2 * kv) * d + h
    if kind in ("qwen2", "qwen2_moe"):
        attn += (heads + 2 * kv) * d  # QKV bias
    if kind in ("qwen3", "qwen3_moe"):
        attn += 2 * d  # per-head q_norm, k_norm
    if kind == "olmo2":
        attn += heads * d + kv * d  # q_norm, k_norm over the projections
    if kind == "gemma3_text":
        attn += 2 * d  # per-head q_norm, k_norm
    # Gemma 2 / 3: post_attention_layernorm and post_feedforward_layernorm besides the two
    layer = attn + (4 if kind in ("gemma2", "gemma3_text") else _norms(cfg)) * norm

    def mlp(width: int) -> int:
        bias = (width + h) if kind in _BIASED else 0
        return (3 if gated else 2) * h * width + bias

    ffn = cfg.get("intermediate_size_mlp") or cfg.get("intermediate_size") or cfg.get("ffn_dim")
    dense = layer + mlp(ffn)
    experts = cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts")
    total = active = 0
    for i in range(layers):
        step = cfg.get("interleave_moe_layer_step") or cfg.get("moe_layer_freq") or 1
        first = cfg.get("first_k_dense_replace") or (
            step - 1 if "interleave_moe_layer_step" in cfg else 0
        )
        if not experts or i < first or (i - first) % step:
            total, active = total + dense, active + dense
            continue
        width = cfg["moe_intermediate_size"] if kind != "llama4_text" else cfg["intermediate_size"]
        shared = cfg.get("shared_expert_intermediate_size") or (
            cfg.get("n_shared_experts", 0) * width
        )
        if kind == "llama4_text":
            shared = width
        router = h * experts + (h if kind == "qwen2_moe" else 0)  # + Qwen2-MoE's shared gate
        base = layer + router + (mlp(shared) if shared else 0)
        total += base + experts * mlp(width)
        active += base + cfg["num_experts_per_tok"] * mlp(width)
    vocab = cfg["vocab_size"]
    tied = cfg.get("tie_word_embeddings", kind in _TIED)
    emb = vocab * h * (1 if tied else 2) + norm
    if kind == "opt":
        emb += (cfg["max_position_embeddings"] + 2) * h  # OPTLearnedPositionalEmbedding
    return total + emb, active + emb


@pytest.mark.parametrize("case", ACCEPTED, ids=[c.stem for c in ACCEPTED])
def test_config_counts_as_its_modeling_code_and_its_published_size(
    tmp_path: Path, case: Case
) -> None:
    """lumos' count within 0.2 % of the one counted from the config (a misread key, head
    width, GQA or tying moves it by more) and within 2 % of the published size."""
    spec = load_model(_path(tmp_path, case))
    total, active = count(_config(case))
    assert spec.params() == pytest.approx(total, rel=2e-3)
    assert spec.params(active=True) == pytest.approx(active, rel=2e-3)
    if case.billions is not None:
        assert spec.params() / 1e9 == pytest.approx(case.billions, rel=0.02)
    if case.active is not None:
        assert spec.params(active=True) / 1e9 == pytest.approx(case.active, rel=0.02)


@pytest.mark.parametrize("case", ACCEPTED, ids=[c.stem for c in ACCEPTED])
def test_published_style_plan_gives_sane_outputs(tmp_path: Path, case: Case) -> None:
    """MFU in (0, 0.8); tokens/s/GPU x GPUs x step time = gbs x seq; the plan fits, holding
    at least its share of the BF16 weights; the result is what the estimate schema allows."""
    result = estimate(_path(tmp_path, case), hw="h100", **case.plan)
    plan = result.plan
    assert 0.0 < result.mfu < 0.8
    tokens = result.tokens_per_s_per_gpu * result.gpus * result.iteration_time_s
    assert tokens == pytest.approx(plan.gbs * plan.seq, rel=1e-3)
    assert result.fits, result.memory.to_json()
    spec = load_model(_path(tmp_path, case))
    assert result.memory.total_gb > 2 * spec.params() / result.gpus / 1e9
    jsonschema.validate(result.to_json(), schemas.load("estimate"))


@pytest.mark.parametrize("stem", sorted(REFUSED))
def test_unmodellable_config_is_refused_naming_file_and_key(stem: str) -> None:
    path = CONFIGS / f"{stem}.json"
    with pytest.raises(ConfigError, match=rf"^{path}: .*{REFUSED[stem]}"):
        load_model(path)


@pytest.mark.parametrize("stem", ["Jamba-v0.1", "rwkv-5-world-3b", "bloom"])
def test_cli_refusal_is_one_line_exit_4_and_writes_nothing(tmp_path: Path, stem: str) -> None:
    path, out = CONFIGS / f"{stem}.json", tmp_path / "et"
    args = ["estimate", "--model", str(path), "--tp", "8", "-o", str(out), "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 4
    error = json.loads(result.stdout)["error"]  # --json: the envelope names the refusal too
    assert error == {"exit_code": 4, "type": "ConfigError", "message": error["message"]}
    assert result.stderr == f"error: {error['message']}\n"
    assert result.stderr.startswith(f"error: {path}: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.output
    assert not out.exists()


def test_cli_json_of_a_battery_config_validates(tmp_path: Path) -> None:
    """`--json` on a config.json lumos has no built-in for (Gemma's GeGLU, tied, head_dim
    256) is the envelope around a result the estimate schema allows."""
    args = ["estimate", "--model", str(CONFIGS / "gemma-7b.json"), "--tp", "2", "--dp", "4"]
    args += ["--gbs", "32", "--seq", "8192", "--hw", "h100", "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, schemas.load("envelope"))
    jsonschema.validate(doc["result"], schemas.load("estimate"))
    assert doc["result"]["model"] == "gemma-7b"
