"""The defaults a Hugging Face model type's config class gives the shape keys a config.json
leaves out: data only, read by `hf_wrappers.with_defaults`.

transformers builds a model from a config.json by passing its keys to the model type's
`<Type>Config`, whose `__init__` (or, in transformers 5, dataclass field) defaults fill
every key the file does not name; Hub files and the `text_config` of multimodal wrappers
write only the keys that differ from those defaults (Gemma 3 27B's `text_config` names no
`vocab_size`). A key the file names always wins, null included (`q_lora_rank: null`).

Only the keys that change what lumos prices are listed: widths, layers, heads, key/value
heads, vocabulary, head size, the MoE and MLA shape keys, and the choices that change
cost (a sliding window, Falcon's `multi_query`). Left out on purpose:

- `num_key_value_heads` where the class defaults it to None (then the heads: lumos' own
  default) — Phi-3, OLMo, OLMo-2, Granite, Llama;
- `head_dim` where the class derives it (hidden / heads: lumos' own; DeepSeek's MLA);
- the activation, norm, biases and tied output layer: `hf_families.FAMILIES` already
  gives each family's class default for them;
- Qwen2 / Qwen3's `sliding_window` (4096, unused unless `use_sliding_window`), Mixtral's
  and Phi-3's (None), DeepSeek-V3's `num_mtp_layers` (transformers builds no MTP layer);
  Qwen2-MoE / Qwen3-MoE's `mlp_only_layers` (an empty list: every layer MoE).

Sources: huggingface/transformers @ 008e5743 (`src/transformers/models/<type>/
configuration_<type>.py`, the transformers-5 dataclass fields) unless an entry names
another commit (the one the look-up index held for that file).

DeepSeek-V2's `q_lora_rank` (1536 in DeepseekV2Config) is left out on purpose: copies of
DeepSeek-V2-Lite's file quoted in public code (mlc-llm's preset) drop its `q_lora_rank:
null`, and filling 1536 would price a query LoRA that model does not have; a file without
the key reads with a full-rank query projection (lumos' own default), as before. Its
`num_experts_per_tok` defaults to None (no routing): a file must name it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Value = int | float | str | bool


@dataclass(frozen=True, slots=True)
class ClassDefaults:
    """A config class's defaults for the keys lumos reads; `source`: where they were read."""

    cls: str
    source: str
    values: Mapping[str, Value]


_AT = "huggingface/transformers @ 008e5743"


def _src(kind: str, at: str = _AT) -> str:
    return f"{at}, models/{kind}/configuration_{kind}.py"


def _dense(vocab: int, hidden: int, ffn: int, layers: int, heads: int) -> dict[str, Value]:
    return {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": ffn,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
    }


#: model_type -> its config class's defaults (module doc)
DEFAULTS: dict[str, ClassDefaults] = {
    "gemma3_text": ClassDefaults(
        "Gemma3TextConfig",
        _src("gemma3", "huggingface/transformers @ 008f5c8c"),
        {
            **_dense(262_208, 2304, 9216, 26, 8),
            "num_key_value_heads": 4,
            "head_dim": 256,
            "hidden_activation": "gelu_pytorch_tanh",
            "sliding_window": 4096,
            "sliding_window_pattern": 6,
            "rms_norm_eps": 1e-6,
        },
    ),
    "gpt_bigcode": ClassDefaults(
        "GPTBigCodeConfig",
        "huggingface/transformers, models/gpt_bigcode/configuration_gpt_bigcode.py",
        {"multi_query": True},
    ),
    "llama": ClassDefaults(
        "LlamaConfig",
        _src("llama"),
        {**_dense(32000, 4096, 11008, 32, 32), "hidden_act": "silu", "rms_norm_eps": 1e-6},
    ),
    # Mistral: 8 KV heads and a 4096-token window unless the file says (null: none)
    "mistral": ClassDefaults(
        "MistralConfig",
        _src("mistral"),
        {**_dense(32000, 4096, 14336, 32, 32), "num_key_value_heads": 8, "sliding_window": 4096},
    ),
    "mixtral": ClassDefaults(
        "MixtralConfig",
        _src("mixtral"),
        {
            **_dense(32000, 4096, 14336, 32, 32),
            "num_key_value_heads": 8,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
        },
    ),
    # Qwen2 / Qwen3: `num_key_value_heads` defaults to 32, not to the heads
    "qwen2": ClassDefaults(
        "Qwen2Config",
        _src("qwen2"),
        {**_dense(151_936, 4096, 22016, 32, 32), "num_key_value_heads": 32},
    ),
    "qwen2_moe": ClassDefaults(
        "Qwen2MoeConfig",
        _src("qwen2_moe"),
        {
            **_dense(151_936, 2048, 5632, 24, 16),
            "num_key_value_heads": 16,
            "num_experts": 60,
            "num_experts_per_tok": 4,
            "moe_intermediate_size": 1408,
            "shared_expert_intermediate_size": 5632,
            "decoder_sparse_step": 1,
        },
    ),
    # Qwen3: a 128-wide head whatever hidden / heads is
    "qwen3": ClassDefaults(
        "Qwen3Config",
        _src("qwen3"),
        {**_dense(151_936, 4096, 22016, 32, 32), "num_key_value_heads": 32, "head_dim": 128},
    ),
    # Qwen3-MoE: no head_dim field (the model takes hidden / heads when the file has none)
    "qwen3_moe": ClassDefaults(
        "Qwen3MoeConfig",
        _src("qwen3_moe"),
        {
            **_dense(151_936, 2048, 6144, 24, 32),
            "num_key_value_heads": 4,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "moe_intermediate_size": 768,
            "decoder_sparse_step": 1,
        },
    ),
    "phi3": ClassDefaults("Phi3Config", _src("phi3"), _dense(32064, 3072, 8192, 32, 32)),
    "gemma": ClassDefaults(
        "GemmaConfig",
        _src("gemma"),
        {**_dense(256_000, 3072, 24576, 28, 16), "num_key_value_heads": 16, "head_dim": 256},
    ),
    # Gemma 2: sliding-window attention on every other layer (`hf_families`), 4096 tokens
    "gemma2": ClassDefaults(
        "Gemma2Config",
        _src("gemma2"),
        {
            **_dense(256_000, 2304, 9216, 26, 8),
            "num_key_value_heads": 4,
            "head_dim": 256,
            "sliding_window": 4096,
        },
    ),
    # DeepSeek-V3: MLA (q / kv LoRA ranks, nope / rope / v head sizes) and its experts
    "deepseek_v3": ClassDefaults(
        "DeepseekV3Config",
        _src("deepseek_v3"),
        {
            **_dense(129_280, 7168, 18432, 61, 128),
            "num_key_value_heads": 128,
            "moe_intermediate_size": 2048,
            "n_shared_experts": 1,
            "n_routed_experts": 256,
            "num_experts_per_tok": 8,
            "first_k_dense_replace": 3,
            "kv_lora_rank": 512,
            "q_lora_rank": 1536,
            "qk_rope_head_dim": 64,
            "v_head_dim": 128,
            "qk_nope_head_dim": 128,
        },
    ),
    "olmo": ClassDefaults("OlmoConfig", _src("olmo"), _dense(50304, 4096, 11008, 32, 32)),
    "olmo2": ClassDefaults("Olmo2Config", _src("olmo2"), _dense(50304, 4096, 11008, 32, 32)),
    "starcoder2": ClassDefaults(
        "Starcoder2Config",
        _src("starcoder2"),
        {**_dense(49152, 3072, 12288, 30, 24), "num_key_value_heads": 2},
    ),
    # GPT-NeoX: multi-head (no key/value-head key), parallel attention and MLP (`hf_families`)
    "gpt_neox": ClassDefaults(
        "GPTNeoXConfig", _src("gpt_neox"), _dense(50432, 6144, 24576, 44, 64)
    ),
    # Falcon (7B's shape): no intermediate_size (4·hidden), one key/value head under
    # `multi_query` unless `new_decoder_architecture` (`hf_layouts`)
    "falcon": ClassDefaults(
        "FalconConfig",
        _src("falcon", "huggingface/transformers @ 05585536"),
        {
            "vocab_size": 65024,
            "hidden_size": 4544,
            "num_hidden_layers": 32,
            "num_attention_heads": 71,
            "multi_query": True,
        },
    ),
    # GPT-J (6B's shape; `n_inner` None: 4·hidden, lumos' own default)
    "gptj": ClassDefaults(
        "GPTJConfig",
        _src("gptj", "huggingface/transformers @ 0bedd330"),
        {"vocab_size": 50400, "n_embd": 4096, "n_layer": 28, "n_head": 16},
    ),
    # Phi-1's shape (PhiConfig's checkpoint microsoft/phi-1)
    "phi": ClassDefaults("PhiConfig", _src("phi"), _dense(51200, 2048, 8192, 24, 32)),
    # Cohere: Command R v01's shape, multi-head (num_key_value_heads None)
    "cohere": ClassDefaults("CohereConfig", _src("cohere"), _dense(256_000, 8192, 22528, 40, 64)),
    # DeepSeek-V2: MLA and experts, no q_lora_rank and no top-k (module doc)
    "deepseek_v2": ClassDefaults(
        "DeepseekV2Config",
        _src("deepseek_v2"),
        {
            **_dense(32000, 4096, 11008, 32, 32),
            "first_k_dense_replace": 0,
            "kv_lora_rank": 512,
            "n_routed_experts": 64,
            "n_shared_experts": 2,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "v_head_dim": 128,
            "moe_intermediate_size": 1407,
        },
    ),
    # OPT-125m's shape; `hidden_size` is OPTConfig's `d_model` (attribute_map), `ffn_dim`
    # its FFN width (`hf_layouts`), 2048 learned positions
    "opt": ClassDefaults(
        "OPTConfig",
        _src("opt", "huggingface/transformers @ 014674d3"),
        {
            "vocab_size": 50272,
            "hidden_size": 768,
            "ffn_dim": 3072,
            "num_hidden_layers": 12,
            "num_attention_heads": 12,
            "max_position_embeddings": 2048,
        },
    ),
    # GPT-2 (124M's shape), 1024 learned positions
    "gpt2": ClassDefaults(
        "GPT2Config",
        _src("gpt2", "huggingface/transformers @ 01ae98ae"),
        {"vocab_size": 50257, "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024},
    ),
    # StableLM-3B-4E1T's shape, 32 key/value heads
    "stablelm": ClassDefaults(
        "StableLmConfig",
        _src("stablelm", "huggingface/transformers @ 05cd1ec1"),
        {**_dense(50304, 2560, 6912, 32, 32), "num_key_value_heads": 32},
    ),
    # GLM-4-9B's shape: 2 key/value heads of 128
    "glm4": ClassDefaults(
        "Glm4Config",
        _src("glm4"),
        {**_dense(151_552, 4096, 13696, 40, 32), "num_key_value_heads": 2, "head_dim": 128},
    ),
    # Granite: Llama-2-7B's shape (num_key_value_heads None)
    "granite": ClassDefaults("GraniteConfig", _src("granite"), _dense(32000, 4096, 11008, 32, 32)),
}
