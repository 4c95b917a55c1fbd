"""Multimodal wrapper configs read as their text model, and the defaults a model type's
transformers config class gives the shape keys a config.json leaves out.

A vision-language model's config.json (`Llama4ForConditionalGeneration`,
`Gemma3ForConditionalGeneration`, `LlavaForConditionalGeneration`,
`Mistral3ForConditionalGeneration`) nests the language model in `text_config` beside a
`vision_config`; Qwen2-VL's and Qwen2.5-VL's write the text model's keys at the top level
beside `vision_config` (transformers before 4.52; after, a `text_config` too). `unwrap`
reads such a file as its text model (the decoder lumos prices) and, once it has been read,
`hf_spec` logs that the vision tower and the projector are not priced: right when they are
frozen or the batch is text only, low by their share otherwise (Gemma 3 27B's SigLIP
tower is about 0.4 B weights beside 27 B). A wrapper's top-level `tie_word_embeddings`
applies when its `text_config` does not say.

Hub files write only the keys that differ from the class defaults (Gemma 3 27B's
`text_config` names no `vocab_size`; LLaVA-1.5's names only the vocabulary and the norm
epsilon of its Llama), so `with_defaults` fills the absent shape keys from the class's
defaults (`hf_defaults.DEFAULTS`, each table with its source), as transformers does when it
builds the model, and says which keys it filled.
"""

from __future__ import annotations

import logging
from typing import Any

from lumos.errors import ConfigError
from lumos.simulator.workload.hf_defaults import DEFAULTS

_LOG = logging.getLogger(__name__)

#: wrapper model_type -> the towers beside its text model that lumos does not price
WRAPPERS: dict[str, str] = {
    "llama4": "the vision tower (Llama4VisionModel) and its projector",
    "gemma3": "the SigLIP vision tower and its projector",
    "llava": "the CLIP vision tower and its projector",
    "mistral3": "the Pixtral vision tower and its projector",
    "qwen2_vl": "the vision transformer (vision_config) and its merger",
    "qwen2_5_vl": "the vision transformer (vision_config) and its merger",
}
#: wrappers that (in transformers before 4.52) write the text model's keys at the top level
#: beside `vision_config` -> the text model type they are (Qwen2VLConfig, Qwen2_5_VLConfig:
#: Qwen2's decoder, its M-RoPE a RoPE)
_FLAT = {"qwen2_vl": "qwen2", "qwen2_5_vl": "qwen2"}
#: a flat wrapper's keys that belong to the vision side (token ids of image / video spans)
_VISION_KEYS = (
    "vision_config", "vision_start_token_id", "vision_end_token_id", "vision_token_id",
    "image_token_id", "video_token_id",
)  # fmt: skip

#: names that give the same value as a default's key (a default yields to any of them)
_SAME = {
    "hidden_activation": ("hidden_act", "activation_function", "activation"),
    "hidden_act": ("hidden_activation", "activation_function", "activation"),
    "sliding_window_pattern": ("layer_types",),
    "sliding_window": ("layer_types",),
    # GPT-2's attribute_map: `max_position_embeddings` is `n_positions`
    "n_positions": ("max_position_embeddings",),
    "max_position_embeddings": ("n_positions",),
}


def unwrap(data: dict[str, Any], where: str) -> tuple[dict[str, Any], str]:
    """`data`'s text model if `data` is a wrapper lumos reads (`WRAPPERS`), else `data`, and
    the note to log once the text model has been read ("" for no wrapper). Raises
    ConfigError naming `where` for a wrapper without a `text_config` mapping."""
    kind = data.get("model_type")
    if not isinstance(kind, str) or kind not in WRAPPERS:
        return data, ""
    text = data.get("text_config")
    if text is None and kind in _FLAT:
        text = {k: v for k, v in data.items() if k not in _VISION_KEYS}
    if not isinstance(text, dict):
        raise ConfigError(
            f"{where}: a {kind!r} wrapper needs its text model in 'text_config' (a mapping)"
        )
    out = dict(text)
    if kind in _FLAT:  # its text_config's own type (qwen2_5_vl_text) is Qwen2's decoder too
        out["model_type"] = _FLAT[kind]
    if "tie_word_embeddings" not in out and data.get("tie_word_embeddings") is not None:
        out["tie_word_embeddings"] = data["tie_word_embeddings"]
    if "_name_or_path" in data and "_name_or_path" not in out:
        out["_name_or_path"] = data["_name_or_path"]
    note = (
        f"{where}: model_type {kind!r}: priced as its text model (model_type "
        f"{out.get('model_type')!r}); {WRAPPERS[kind]} are not priced"
    )
    return out, note


def log_note(note: str) -> None:
    """Log `unwrap`'s note (a warning: the step leaves out the vision side)."""
    if note:
        _LOG.warning("%s", note)


def with_defaults(
    data: dict[str, Any], aliases: dict[str, tuple[str, ...]], where: str
) -> tuple[dict[str, Any], str]:
    """`data` with its model type's class defaults (`hf_defaults.DEFAULTS`) for the keys it
    leaves out, and the note naming them ("" when none was filled); a default yields to any
    name that gives the same value (`aliases`' groups), a key the file names always wins."""
    kind = data.get("model_type")
    table = DEFAULTS.get(kind) if isinstance(kind, str) else None
    if table is None:
        return data, ""
    groups = {n: names for names in aliases.values() for n in names}
    out = dict(data)
    filled = []
    for key, value in table.values.items():
        same = (*groups.get(key, (key,)), *_SAME.get(key, ()))
        if not any(name in out for name in (key, *same)):
            out[key] = value
            filled.append(f"{key}={value!r}")
    if not filled:
        return out, ""
    note = (
        f"{where}: model_type {kind!r} leaves out {', '.join(filled)}: "
        f"{table.cls}'s defaults, as transformers fills them ({table.source})"
    )
    return out, note


#: the shape keys a spec cannot do without (lumos' names)
_REQUIRED = ("layers", "hidden", "heads", "vocab")


def require_shape(
    out: dict[str, Any],
    rest: dict[str, Any],
    kind: object,
    aliases: dict[str, tuple[str, ...]],
    where: str,
) -> None:
    """Raise a ConfigError naming `where`, the model type and the key by the config's names
    (`aliases`: lumos key -> its own name first, then the config names) when a config.json
    with model type `kind` leaves out a shape key that neither the file nor its class
    defaults give (`out`: the translated keys; a hybrid pattern in `rest` gives the layers)."""
    if not isinstance(kind, str):
        return
    for key in _REQUIRED:
        if out.get(key) is not None or (
            key == "layers" and ("hybrid_override_pattern" in rest or "pattern" in rest)
        ):
            continue
        names = " / ".join(repr(n) for n in aliases[key][1:])
        table = DEFAULTS.get(kind)
        why = (
            f"{table.cls}'s defaults do not give it either"
            if table
            else "lumos holds no config-class defaults for that model type"
        )
        raise ConfigError(
            f"{where}: model_type {kind!r} leaves out {names} (lumos' {key!r}) and {why}; "
            "add it to the file"
        )
