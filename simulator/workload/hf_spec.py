"""Hugging Face and Megatron model configs read as lumos model specs: the dense keys.

`lumos_keys` turns a config.json (Hugging Face `transformers`), a Megatron-LM / Megatron-Core
argument mapping or a GPT-2-style config into lumos' keys (`layers, hidden, heads, kv_heads,
ffn, vocab, mlp, norm, tied_embeddings, position, bias, seq`); the mixture-of-experts and
attention-shape names go on to `moe_spec`. What the names mean:

- renamed as they are: `ALIASES` (`num_hidden_layers`/`n_layer`/`num_layers` -> layers, ...);
- the MLP from the activation (`hidden_act`, `activation_function`, `hidden_activation`,
  Megatron's `swiglu` / `squared_relu` / `gated_linear_unit`, NeMo's `activation`) and
  whether the architecture gates it (`hf_families.FAMILIES` by `model_type`: Llama,
  Mistral, Qwen, DeepSeek, Gemma, GPT-OSS gated; GPT-2, GPT-NeoX, Falcon, Nemotron, OPT
  not; NeMo's `geglu` / `fast-geglu` / `fast-swiglu` gated): silu / swish gated -> swiglu,
  gelu* gated -> geglu, gelu* ungated -> gelu, relu2 -> squared_relu, relu ungated -> relu;
- the norm from the field the config has (`rms_norm_eps` -> rmsnorm, `layer_norm_eps` /
  `layer_norm_epsilon` -> layernorm, Megatron's `normalization`), else the family's;
- `bias` (lumos: every linear layer has a bias, GPT-style) when the config's attention and
  MLP both have them; an attention-only bias (Qwen2's QKV bias, `add_qkv_bias`) reads as
  false: under 0.01 % of the weights, its add runs in the GEMM epilogue;
- `position` learned for GPT-2 / Megatron `learned_absolute` (the table's rows, `n_positions`
  / `max_position_embeddings`, become `seq`), else rope; a rope config's
  `max_position_embeddings` is its context limit, not the training sequence: `seq` is
  Megatron's `seq_length` (NeMo `encoder_seq_length`) if given, else lumos' 2048;
- a Megatron mapping (`MEGATRON` names present, no `model_type`) takes Megatron-LM's
  defaults for what it leaves out: GeLU, LayerNorm, linear biases, learned positions, tied.

Keys that do not change a step's cost are dropped (`IGNORED`, and transformers' private
`_...` attributes such as `_attn_implementation`); architectures lumos does not model are
refused by name, first by key (`UNMODELLED`), then by `model_type`
(`hf_families.REFUSED`), before any other key is looked at; a block that runs attention and
MLP in parallel is read by `hf_parallel`; model types that spell their
shape their own way are rewritten first (`hf_layouts`); any other key is "unknown" with a
did-you-mean.
"""

from __future__ import annotations

import difflib
from typing import Any

from lumos.errors import ConfigError
from lumos.simulator.workload.hf_block import BLOCK_NAMES, block_traits
from lumos.simulator.workload.hf_families import Family, family
from lumos.simulator.workload.hf_layouts import rewrite
from lumos.simulator.workload.hf_parallel import PARALLEL_NAMES, parallel_traits
from lumos.simulator.workload.hf_wrappers import log_note, require_shape, unwrap, with_defaults
from lumos.simulator.workload.moe_spec import ALIASES as MOE_ALIASES

#: lumos key -> names that give it as they are (lumos' own first)
ALIASES: dict[str, tuple[str, ...]] = {
    "layers": ("layers", "num_hidden_layers", "n_layer", "num_layers"),
    "hidden": ("hidden", "hidden_size", "n_embd"),
    "heads": ("heads", "num_attention_heads", "n_head"),
    "kv_heads": ("kv_heads", "num_key_value_heads", "num_query_groups", "num_kv_heads"),
    "ffn": ("ffn", "intermediate_size", "ffn_hidden_size", "n_inner"),
    "vocab": ("vocab", "vocab_size"),
    "seq": ("seq", "seq_length", "encoder_seq_length"),
}
#: names that choose mlp / norm / bias / position / tied embeddings (resolved below)
DERIVED = (
    "hidden_act", "activation_function", "activation", "hidden_activation", "mlp_hidden_act",
    "swiglu",
    "squared_relu", "use_bias",
    "gated_linear_unit", "normalization", "rms_norm_eps", "layer_norm_eps",
    "layer_norm_epsilon", "layernorm_epsilon", "norm_eps", "norm_epsilon",
    "apply_layernorm_1p", "layernorm_zero_centered_gamma", "attention_bias", "mlp_bias",
    "add_bias_linear", "disable_bias_linear", "add_qkv_bias", "qkv_bias", "use_qkv_bias",
    "position_embedding_type", "use_rotary_position_embeddings", "n_positions",
    "max_position_embeddings", "max_sequence_length", "tie_word_embeddings",
    "untie_embeddings_and_output_weights", "share_embeddings_and_output_weights",
    "group_query_attention", "multi_query", "make_vocab_size_divisible_by",
    "model_type", "architectures", "_name_or_path", "padded_vocab_size",
)  # fmt: skip
#: names only Megatron-LM / Megatron-Core use: their presence means Megatron's defaults
MEGATRON = (
    "num_layers", "ffn_hidden_size", "num_query_groups", "normalization", "swiglu",
    "squared_relu", "gated_linear_unit", "add_bias_linear", "disable_bias_linear",
    "position_embedding_type", "untie_embeddings_and_output_weights",
    "share_embeddings_and_output_weights", "padded_vocab_size", "seq_length",
    "group_query_attention",
)  # fmt: skip
#: accepted and dropped: they do not change what a training step computes or moves
#: (regularisation, init, numerics' epsilons, RoPE's base and scaling, token ids, inference
#: settings, routing details lumos prices as the softmax top-k, QK-norm as the built-ins)
IGNORED = frozenset((
    "attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop",
    "summary_first_dropout", "initializer_range", "init_method_std", "initializer_factor",
    "rope_theta", "rope_scaling", "rotary_base", "rotary_percent", "rotary_pct",
    "partial_rotary_factor", "rotary_emb_base", "rope_interleave", "bos_token_id",
    "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id", "torch_dtype",
    "transformers_version", "use_cache", "pretraining_tp", "auto_map", "quantization_config",
    "output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "aux_loss_alpha",
    "seq_aux", "norm_topk_prob", "n_group", "topk_group", "topk_method", "scoring_func",
    "routed_scaling_factor", "ep_size", "moe_aux_loss_coeff", "moe_router_score_function",
    "moe_router_load_balancing_type", "moe_router_dtype", "moe_z_loss_coeff", "swiglu_limit",
    "max_window_layers", "n_ctx", "initial_context_length", "summary_type", "summary_use_proj",
    "summary_activation", "summary_proj_to_labels", "task_specific_params",
    "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
    "tokenizer_class", "dtype",
    # Qwen2.5's `use_mrope` (multimodal RoPE positions), Phi-3's RoPE-scaling length and
    # its `full_attn_mod` / `interpolate_factor` (read by no transformers model), a bias on
    # the output layer (vocab floats), OLMo's / DBRX's clamp of QKV (`clip_qkv`, elementwise)
    "use_mrope", "original_max_position_embeddings", "full_attn_mod", "interpolate_factor",
    "lm_head_bias", "clip_qkv",
    # Granite's scalar multipliers; StarCoder2's softmax precision, dropouts and the
    # original `norm_type` / `mlp_type` names transformers does not read (LayerNorm, GeLU)
    "attention_multiplier", "embedding_multiplier", "residual_multiplier", "logits_scaling",
    "attention_softmax_in_fp32", "scale_attention_softmax_in_fp32", "residual_dropout",
    "embedding_dropout", "norm_type", "mlp_type",
    # Llama 4's NoPE layers (RoPE skipped on every fourth), attention temperature tuning,
    # router noise; inference-only settings
    "no_rope_layers", "no_rope_layer_interval", "attn_temperature_tuning", "floor_scale",
    "attn_scale", "router_jitter_noise", "for_llm_compressor", "cache_implementation",
    "attn_implementation",
    # GPT-J's RoPE (`rotary`) on the first `rotary_dim` of each head (priced as RoPE),
    # Cohere's scalar `logit_scale` (one multiply, fused into the loss) and tokenizer length,
    # GPT-NeoX's classifier-head dropout
    "rotary", "rotary_dim", "logit_scale", "model_max_length", "classifier_dropout",
    # transformers 5's name for RoPE's base and scaling; Seed-OSS's bias on the attention
    # output projection (h floats a layer, added in the GEMM epilogue)
    "rope_parameters", "attention_out_bias",
    # GPT-2 files of OpenAI's checkpoints (gpt2-medium, -large) carry OpenAI GPT's
    # special-token settings, which GPT2Config does not read; SmolLM2's nanotron conversion
    # flags and transformers.js export settings, which LlamaConfig does not read;
    # SantaCoder's inference-runner length
    "n_special", "predict_special_tokens", "is_llama_config", "rope_interleaved",
    "transformers.js_config", "runner_max_sequence_length",
))  # fmt: skip
#: keys of architectures lumos does not model -> what they are (refused when set)
UNMODELLED = {
    "text_config": "a multimodal wrapper around a text model",
    "is_encoder_decoder": "an encoder-decoder model",
    "vision_config": "a vision tower beside the text model",
    "audio_config": "an audio tower beside the text model",
    "cross_attention_layers": "cross-attention layers",
    "use_sliding_window": "sliding-window attention on the layers past max_window_layers",
    "alibi": "ALiBi attention biases instead of position embeddings",
    "layerdrop": "layers skipped at random in training (LayerDrop)",
}


#: a Megatron mapping's defaults (Megatron-LM arguments.py)
_MEGATRON = Family(False, "layernorm", bias=(True, True), position="learned", tied=True, act="gelu")
_ACTIVATION = {
    **dict.fromkeys(("silu", "swish", "swiglu", "fast-swiglu"), "silu"),
    **dict.fromkeys(("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python"), "gelu"),
    **dict.fromkeys(("quick_gelu", "gelu_accurate", "geglu", "fast-geglu"), "gelu"),
    **dict.fromkeys(("relu2", "squared-relu", "squared_relu"), "squared_relu"),
    "gelu_tanh": "gelu",
    "relu": "relu",
}
#: names that give the activation, and the activations whose name says the MLP is gated
_ACT_NAMES = (
    "hidden_act",
    "activation_function",
    "activation",
    "hidden_activation",
    "mlp_hidden_act",
)
_GATED_NAMES = ("swiglu", "fast-swiglu", "geglu", "fast-geglu")
LUMOS_ONLY = ("mlp", "norm", "tied_embeddings", "position", "bias", "dropout", "name")


def _set(value: Any) -> bool:
    return value not in (None, False, 0, "", [], {})


def _take(data: dict[str, Any], names: tuple[str, ...], where: str) -> Any:
    """The value `names` give (popped; None if none); two that differ are a ConfigError."""
    given = [(n, data.pop(n)) for n in names if n in data]
    given = [(n, v) for n, v in given if v is not None]
    if len({repr(v) for _, v in given}) > 1:
        (a, va), (b, vb) = given[0], given[1]
        raise ConfigError(f"{where}: {a!r} ({va!r}) and {b!r} ({vb!r}) disagree")
    return given[0][1] if given else None


def lumos_keys(data: dict[str, Any], where: str, known: tuple[str, ...]) -> dict[str, Any]:
    """`data` with the dense HF / Megatron names translated to lumos keys and the ignored
    ones dropped; `known`: the other keys a spec takes (lumos' MoE keys and their
    aliases). Raises ConfigError naming `where` and the key for an unmodelled
    architecture, an unknown key (with a did-you-mean) or names that disagree."""
    data, note = unwrap(data, where)
    data, filled = with_defaults(data, {**ALIASES, **MOE_ALIASES}, where)
    data = {k: v for k, v in data.items() if not _private(k)}
    for key, what in UNMODELLED.items():
        if key in data and _set(data[key]):
            hint = "; give its text_config as the file" if key == "text_config" else ""
            raise ConfigError(f"{where}: {key!r} means {what}, which lumos does not model{hint}")
    family = _family(data, where)  # an unmodelled model type is refused before its keys
    data = rewrite(data.get("model_type"), data, where)
    names = {n for group in ALIASES.values() for n in group}
    allowed = names | set(DERIVED) | IGNORED | set(UNMODELLED) | set(known) | set(LUMOS_ONLY)
    allowed |= BLOCK_NAMES | PARALLEL_NAMES
    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"{where}: unknown key {key!r}{hint} (lumos keys, the Hugging Face / Megatron "
                "names of docs/estimate.md, or ones it ignores)"
            )
    rest = {k: v for k, v in data.items() if k not in IGNORED and k not in UNMODELLED}
    if data.get("use_sliding_window") is False:  # Qwen2/3: `sliding_window` is then unused
        rest.pop("sliding_window", None)
    for key in ("architectures", "model_type"):
        rest.pop(key, None)
    out = {k: v for k in ALIASES if (v := _take(rest, ALIASES[k], where)) is not None}
    if rest.pop("group_query_attention", None) is False:
        out.pop("kv_heads", None)
    if rest.pop("multi_query", None):
        out["kv_heads"] = 1
    padded = rest.pop("padded_vocab_size", None)
    if padded is not None:  # Megatron's: vocab_size padded for the TP split
        out["vocab"] = padded
    else:
        _vocab(out, rest.pop("make_vocab_size_divisible_by", None), where)
    rest.pop("make_vocab_size_divisible_by", None)
    for key in ("head_dim", "kv_channels"):
        if key in rest and rest[key] is None:
            del rest[key]
    out["mlp"] = _mlp(rest, family, where)
    out["norm"] = _norm(rest, family, where)
    out["bias"] = _bias(rest, family)
    out["tied_embeddings"] = _tied(rest, family)
    out["position"] = _position(rest, family, where)
    table = _take(rest, ("n_positions", "max_position_embeddings", "max_sequence_length"), where)
    if out["position"] == "learned" and table is not None and "seq" not in out:
        out["seq"] = table  # the learned table's rows: what the model runs at
    rest = block_traits(rest, family, out.get("layers"), where)
    rest = parallel_traits(rest, family, where)
    out["name"] = rest.pop("name", None) or rest.pop("_name_or_path", None)
    rest.pop("_name_or_path", None)
    require_shape(out, rest, data.get("model_type"), ALIASES, where)
    log_note(note)
    log_note(filled)
    return {**rest, **{k: v for k, v in out.items() if v is not None}}


def _private(key: object) -> bool:
    """transformers' private attributes (`_attn_implementation`, `_commit_hash`, ...), which
    never describe the architecture; `_name_or_path` names the model."""
    return isinstance(key, str) and key.startswith("_") and key != "_name_or_path"


def _family(data: dict[str, Any], where: str) -> Family | None:
    """The config's family: its `model_type`'s (`hf_families.family`, which refuses the
    model types lumos does not model), Megatron's, or None (lumos' own keys)."""
    kind = data.get("model_type")
    if kind is not None:
        return family(kind, where)
    return _MEGATRON if any(k in data for k in MEGATRON) else None


def _vocab(out: dict[str, Any], multiple: Any, where: str) -> None:
    """Megatron pads the vocabulary to a multiple of `make_vocab_size_divisible_by`."""
    if multiple is None or "vocab" not in out:
        return
    if isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 1:
        raise ConfigError(f"{where}: make_vocab_size_divisible_by must be a positive integer")
    if isinstance(out["vocab"], int):
        out["vocab"] = -(-out["vocab"] // multiple) * multiple


def _mlp(data: dict[str, Any], family: Family | None, where: str) -> Any:
    lumos = data.pop("mlp", None)
    swiglu, squared = data.pop("swiglu", None), data.pop("squared_relu", None)
    gated = data.pop("gated_linear_unit", None)
    act = _activation(data, where)
    if lumos is not None:
        return lumos
    if squared:
        return "squared_relu"
    if swiglu:
        return "swiglu"
    if act is None:
        if family is None:
            return None
        act = family.act
    name = str(act).lower()
    kind = _ACTIVATION.get(name)
    gated = bool(gated) if gated is not None else name in _GATED_NAMES
    gated = gated or bool(family and family.gated)
    if kind is None:
        raise ConfigError(f"{where}: activation {act!r} is not modelled (silu, gelu, relu, relu2)")
    if kind == "silu" and gated:
        return "swiglu"
    if kind == "gelu":
        return "geglu" if gated else "gelu"
    if kind in ("squared_relu", "relu") and not gated:
        return kind
    hint = (
        "" if family else " (or say which it is: mlp: swiglu | geglu | gelu | relu | squared_relu)"
    )
    raise ConfigError(f"{where}: a {'gated' if gated else 'plain'} {act} MLP is not modelled{hint}")


def _activation(data: dict[str, Any], where: str) -> Any:
    """The activation the config names (popped; None if none). Gemma 2 gives `hidden_act`
    and `hidden_activation`, StarCoder2 `hidden_act` gelu_pytorch_tanh and
    `activation_function` gelu: names of one kind agree; of two kinds, a ConfigError."""
    given = [(n, data.pop(n)) for n in _ACT_NAMES if n in data]
    given = [(n, v) for n, v in given if v is not None]
    kinds = {_ACTIVATION.get(str(v).lower(), repr(v)) for _, v in given}
    if len(kinds) > 1:
        (a, va), (b, vb) = given[0], given[1]
        raise ConfigError(f"{where}: {a!r} ({va!r}) and {b!r} ({vb!r}) disagree")
    return given[0][1] if given else None


def _norm(data: dict[str, Any], family: Family | None, where: str) -> Any:
    lumos, megatron = data.pop("norm", None), data.pop("normalization", None)
    rms = data.pop("rms_norm_eps", None) is not None
    ln = [data.pop(k, None) for k in ("layer_norm_eps", "layer_norm_epsilon", "layernorm_epsilon")]
    one_p = [data.pop(k, None) for k in ("apply_layernorm_1p", "layernorm_zero_centered_gamma")]
    for k in ("norm_eps", "norm_epsilon"):
        data.pop(k, None)
    if lumos is not None:
        return lumos
    if megatron is not None:
        kind = str(megatron).lower().replace("layernorm1p", "layernorm")
        if kind not in ("layernorm", "rmsnorm"):
            raise ConfigError(f"{where}: normalization {megatron!r} is not modelled")
        return kind
    if rms or any(v is not None for v in ln) or any(one_p):
        return "rmsnorm" if rms else "layernorm"
    return family.norm if family else None


def _bias(data: dict[str, Any], family: Family | None) -> Any:
    """True when attention and MLP linears both have biases (module doc)."""
    lumos = data.pop("bias", None)
    add = data.pop("add_bias_linear", None)
    use = data.pop("use_bias", None)  # StarCoder2: every linear
    add = use if add is None else add
    off = data.pop("disable_bias_linear", None)
    attention, mlp = data.pop("attention_bias", None), data.pop("mlp_bias", None)
    for key in ("add_qkv_bias", "qkv_bias", "use_qkv_bias"):  # QKV only: not priced (module doc)
        data.pop(key, None)
    if lumos is not None:
        return lumos
    if add is not None or off is not None:
        return bool(add) if add is not None else not off
    if family is None and attention is None and mlp is None:
        return None
    default = family.bias if family else (False, False)
    attention = default[0] if attention is None else attention
    mlp = default[1] if mlp is None else mlp
    return bool(attention and mlp)


def _tied(data: dict[str, Any], family: Family | None) -> Any:
    lumos = data.pop("tied_embeddings", None)
    hf = data.pop("tie_word_embeddings", None)
    untie = data.pop("untie_embeddings_and_output_weights", None)
    share = data.pop("share_embeddings_and_output_weights", None)
    for value in (lumos, hf, share):
        if value is not None:
            return value
    if untie is not None:
        return not untie
    return family.tied if family else None


def _position(data: dict[str, Any], family: Family | None, where: str) -> Any:
    lumos = data.pop("position", None)
    megatron = data.pop("position_embedding_type", None)
    rotary = data.pop("use_rotary_position_embeddings", None)
    if lumos is not None:
        return lumos
    if megatron is not None:
        kinds = {"rope": "rope", "learned_absolute": "learned"}
        if not isinstance(megatron, str) or megatron not in kinds:
            raise ConfigError(f"{where}: position_embedding_type {megatron!r} is not modelled")
        return kinds[megatron]
    if rotary:
        return "rope"
    return family.position if family else None
