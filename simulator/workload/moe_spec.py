"""Mixture-of-experts and attention-shape keys of a model spec, with their common aliases.

lumos' own keys: `experts` (routed experts per MoE layer), `top_k` (experts per token),
`moe_ffn` (one expert's FFN width, default `ffn`), `shared_ffn` (total width of the
always-active shared-expert MLP, 0: none) or `shared_experts` (their count, each
`moe_ffn` wide), `moe_every` (every n-th layer is MoE, Megatron's `moe_layer_freq`),
`first_dense` (leading dense layers, DeepSeek's `first_k_dense_replace`), `head_dim`
(when it is not hidden / heads), `window` / `window_every` (sliding-window attention on
every n-th layer, from layer 0), `chunk` (Llama 4's `attention_chunk_size`), and multi-head latent attention (DeepSeek-V2/V3 MLA:
`kv_lora` > 0, the KV compression rank; `q_lora`, the query compression rank, 0: queries
projected directly; `qk_nope` / `qk_rope`, the per-head query/key widths without and with
RoPE; `v_head`, the per-head value width), and `mtp_layers` (multi-token prediction
layers: Megatron-Core's `mtp_num_layers`, DeepSeek's `num_nextn_predict_layers`). Hugging Face and Megatron names are accepted for
each (`ALIASES`), so a config.json's values can be pasted (a `null` MLA rank reads as 0).
What lumos does not model is refused by name (`UNMODELLED`) rather than estimated as
something else.
"""

from __future__ import annotations

from typing import Any

from lumos.errors import ConfigError

#: lumos key -> accepted names (first: lumos' own)
ALIASES: dict[str, tuple[str, ...]] = {
    "experts": (
        "experts",
        "num_experts",
        "moe_experts",
        "num_local_experts",
        "n_routed_experts",
        "moe_num_experts",
    ),
    "top_k": (
        "top_k",
        "num_experts_per_tok",
        "experts_per_token",
        "moe_router_topk",
        "moe_top_k",
    ),
    "moe_ffn": ("moe_ffn", "moe_intermediate_size", "moe_ffn_hidden_size"),
    "shared_ffn": (
        "shared_ffn",
        "shared_expert_intermediate_size",
        "moe_shared_expert_intermediate_size",
    ),
    "shared_experts": ("shared_experts", "n_shared_experts", "num_shared_experts"),
    "moe_every": ("moe_every", "moe_layer_freq", "decoder_sparse_step"),
    "first_dense": ("first_dense", "first_k_dense_replace"),
    "head_size": ("head_dim", "kv_channels", "head_size", "attention_head_dim"),
    "window": ("window", "sliding_window", "sliding_window_size"),
    "window_every": ("window_every",),
    "chunk": ("chunk", "attention_chunk_size"),
    "q_lora": ("q_lora", "q_lora_rank"),
    "kv_lora": ("kv_lora", "kv_lora_rank"),
    "qk_nope": ("qk_nope", "qk_nope_head_dim"),
    "qk_rope": ("qk_rope", "qk_rope_head_dim", "qk_pos_emb_head_dim"),
    "v_head": ("v_head", "v_head_dim"),
    "mtp_layers": ("mtp_layers", "mtp_num_layers", "num_nextn_predict_layers"),
}
#: the MLA keys (a config.json gives `q_lora_rank: null` for unprojected queries)
MLA = ("q_lora", "kv_lora", "qk_nope", "qk_rope", "v_head")
#: keys of architectures lumos does not model -> what they are
UNMODELLED = {
    "mlp_only_layers": "an irregular list of dense layers",
}
DEFAULTS = {
    "head_size": 0,
    "experts": 0,
    "top_k": 0,
    "moe_ffn": 0,
    "shared_ffn": 0,
    "moe_every": 1,
    "first_dense": 0,
    "window": 0,
    "window_every": 2,
    "chunk": 0,
    "q_lora": 0,
    "kv_lora": 0,
    "qk_nope": 0,
    "qk_rope": 0,
    "v_head": 0,
    "mtp_layers": 0,
}


def _count(value: Any, where: str, zero: bool = True) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if zero else 1):
        kind = "a non-negative" if zero else "a positive"
        raise ConfigError(f"{where} must be {kind} integer, got {value!r}")
    return value


def _take(data: dict[str, Any], key: str, where: str) -> tuple[str, Any] | None:
    """The (name, value) giving `key`, popped; names that agree may all be given (GPT-OSS's
    config.json has `experts_per_token` and `num_experts_per_tok`), ones that differ not."""
    given = [name for name in ALIASES[key] if name in data]
    if len({repr(data[n]) for n in given}) > 1:
        raise ConfigError(f"{where}: {given[0]!r} and {given[1]!r} both give {key!r}")
    values = [data.pop(n) for n in given]
    return (given[0], values[0]) if given else None


def moe_fields(data: dict[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the other keys, the MoE / attention-shape values with defaults). Raises ConfigError
    for an unmodelled architecture, a bad value, or MoE keys without `experts`."""
    for key, what in UNMODELLED.items():
        if key in data and data[key] not in (None, 0, [], False):
            raise ConfigError(f"{where}: {key!r} means {what}, which lumos does not model")
    rest = {k: v for k, v in data.items() if k not in UNMODELLED}  # unset: nothing to model
    values = dict(DEFAULTS)
    shared_count, zero_ffn = 0, ""
    for key in ALIASES:
        got = _take(rest, key, where)
        if got is None:
            continue
        name, value = got
        if key in (*MLA, "mtp_layers") and value is None:
            continue
        if key == "moe_every" and isinstance(value, list):
            raise ConfigError(f"{where}: {name!r} as a list is not modelled; give an integer")
        n = _count(value, f"{where}: {name}", zero=key not in ("moe_every", "window_every"))
        zero_ffn = name if key == "moe_ffn" and n == 0 else zero_ffn
        if key == "shared_experts":
            shared_count = n
        else:
            values[key] = n
    _check_mla(values, where)
    if values["experts"] == 0:
        moe_only = [k for k in ("top_k", "moe_ffn", "shared_ffn") if values[k]]
        if moe_only or shared_count:
            raise ConfigError(f"{where}: {(moe_only or ['shared_experts'])[0]!r} needs experts")
        return rest, values
    if not 1 <= values["top_k"] <= values["experts"]:
        raise ConfigError(
            f"{where}: a mixture of experts needs top_k (experts per token) between 1 and "
            f"experts ({values['experts']}), got {values['top_k']}"
        )
    if zero_ffn:  # 0 is the default (the dense ffn) only when the key is not given
        raise ConfigError(
            f"{where}: {zero_ffn} must be a positive integer (one expert's FFN width), got 0"
        )
    if shared_count:
        if values["shared_ffn"]:
            raise ConfigError(f"{where}: give shared_experts or shared_ffn, not both")
        values["shared_ffn"] = -shared_count  # resolved against moe_ffn by the caller
    return rest, values


def _check_mla(values: dict[str, Any], where: str) -> None:
    """MLA needs all three per-head widths; its other keys need `kv_lora`."""
    if values["kv_lora"]:
        missing = [k for k in ("qk_nope", "qk_rope", "v_head") if not values[k]]
        if missing:
            raise ConfigError(
                f"{where}: multi-head latent attention (kv_lora_rank) needs {ALIASES[missing[0]][1]}"
            )
    elif any(values[k] for k in MLA):
        given = next(k for k in MLA if values[k])
        raise ConfigError(f"{where}: {ALIASES[given][1]!r} needs kv_lora_rank (MLA)")
