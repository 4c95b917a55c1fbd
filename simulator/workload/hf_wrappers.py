"""Multimodal wrapper configs read as their text model, and the defaults a model type's
transformers config class gives the shape keys a config.json leaves out.

A vision-language model's config.json (`Llama4ForConditionalGeneration`,
`Gemma3ForConditionalGeneration`, `LlavaForConditionalGeneration`) nests the language model
in `text_config` beside a `vision_config`. `unwrap` reads such a file as its `text_config`
(the decoder lumos prices) and logs that the vision tower and the projector are not
priced: right when they are frozen or the batch is text only, low by their share otherwise
(Gemma 3 27B's SigLIP tower is about 0.4 B weights beside 27 B). A wrapper's top-level
`tie_word_embeddings` applies when its `text_config` does not say.

Hub files write only the keys that differ from the class defaults (Gemma 3 27B's
`text_config` names no `vocab_size`; LLaVA-1.5's names only the vocabulary and the norm
epsilon of its Llama), so `with_defaults` fills the absent shape keys from the class's
`__init__` defaults, as transformers does when it builds the model:

- `gemma3_text`: `Gemma3TextConfig` (huggingface/transformers @ 008f5c8c,
  `models/gemma3/configuration_gemma3.py`): vocab_size 262208, hidden_size 2304,
  intermediate_size 9216, num_hidden_layers 26, num_attention_heads 8, num_key_value_heads
  4, head_dim 256, hidden_activation gelu_pytorch_tanh, sliding_window 4096,
  sliding_window_pattern 6;
- `llama`: `LlamaConfig` (`models/llama/configuration_llama.py`): vocab_size 32000,
  hidden_size 4096, intermediate_size 11008, num_hidden_layers 32, num_attention_heads 32,
  hidden_act silu (num_key_value_heads None: the heads; rms_norm_eps 1e-6);
- `gpt_bigcode`: `GPTBigCodeConfig`: multi_query true (one key/value head).
"""

from __future__ import annotations

import logging
from typing import Any

from lumos.errors import ConfigError

_LOG = logging.getLogger(__name__)

#: wrapper model_type -> the towers beside its text model that lumos does not price
WRAPPERS: dict[str, str] = {
    "llama4": "the vision tower (Llama4VisionModel) and its projector",
    "gemma3": "the SigLIP vision tower and its projector",
    "llava": "the CLIP vision tower and its projector",
}

#: text model_type -> its config class's defaults for the shape keys (module doc)
TEXT_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {
        "vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216,
        "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 4096,
        "sliding_window_pattern": 6, "rms_norm_eps": 1e-6,
    },
    "gpt_bigcode": {"multi_query": True},
    "llama": {
        "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
        "num_hidden_layers": 32, "num_attention_heads": 32, "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
    },
}  # fmt: skip
#: names that give the same value as a default's key (a default yields to any of them)
_SAME = {
    "hidden_activation": ("hidden_act", "activation_function", "activation"),
    "hidden_act": ("hidden_activation", "activation_function", "activation"),
    "sliding_window_pattern": ("layer_types",),
    "sliding_window": ("layer_types",),
}


def unwrap(data: dict[str, Any], where: str) -> dict[str, Any]:
    """`data`'s `text_config` if `data` is a wrapper lumos reads (`WRAPPERS`), else `data`.
    Raises ConfigError naming `where` for a wrapper without a `text_config` mapping."""
    kind = data.get("model_type")
    if not isinstance(kind, str) or kind not in WRAPPERS:
        return data
    text = data.get("text_config")
    if not isinstance(text, dict):
        raise ConfigError(
            f"{where}: a {kind!r} wrapper needs its text model in 'text_config' (a mapping)"
        )
    out = dict(text)
    if "tie_word_embeddings" not in out and data.get("tie_word_embeddings") is not None:
        out["tie_word_embeddings"] = data["tie_word_embeddings"]
    if "_name_or_path" in data and "_name_or_path" not in out:
        out["_name_or_path"] = data["_name_or_path"]
    _LOG.warning(
        "%s: model_type %r: pricing its text_config (model_type %r) only; %s are not priced",
        where, kind, out.get("model_type"), WRAPPERS[kind],
    )  # fmt: skip
    return out


def with_defaults(data: dict[str, Any], aliases: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """`data` with its model type's class defaults (`TEXT_DEFAULTS`) for the keys it leaves
    out; a default yields to any name that gives the same value (`aliases`' groups)."""
    defaults = TEXT_DEFAULTS.get(str(data.get("model_type")))
    if not defaults:
        return data
    groups = {n: names for names in aliases.values() for n in names}
    out = dict(data)
    for key, value in defaults.items():
        same = (*groups.get(key, (key,)), *_SAME.get(key, ()))
        if not any(name in out for name in (key, *same)):
            out[key] = value
    return out
