"""Config layouts of model types that rename a plain decoder's keys (MPT, EXAONE), rewritten
into the names `hf_spec` reads; `hf_layouts.rewrite` calls them by model type.

- `mpt` (llm-foundry configuration_mpt.py; transformers' MptConfig): `d_model`,
  `n_heads`, `n_layers`, the FFN `expansion_ratio` x `d_model` wide, `no_bias`, the
  attention in `attn_config`. ALiBi (`alibi`, MPT's default) is read as no position
  embedding: its bias is computed inside the attention kernel from one slope a head
  (FlashAttention-2's `alibi_slopes`, flash-attn 2.4; llm-foundry's `attn_impl: flash`),
  one add per score beside the QK^T and PV products' 2 x head_dim multiply-adds, so it is
  priced as causal attention (the unfused `torch` path's [heads, 1, seq] bias is as small);
  without ALiBi MPT learns a position table (`learned_pos_emb`). `kv_n_heads` gives
  grouped-query heads; `qk_ln` is a norm over queries and keys (QK-norm); a prefix-LM mask
  (`prefix_lm`) and an FFN other than MPT's own (`ffn_config.ffn_type`) are refused;
  `max_seq_len` is the context limit and the initialisation, device, tokenizer and dropout
  settings are dropped;
- `exaone` (EXAONE 3.0 / 3.5, LG AI Research's modeling_exaone.py): its norms are RMSNorms
  (`ExaoneRMSNorm` as `ln_1`, `ln_2`, `ln_f`) although the config calls their epsilon
  `layer_norm_epsilon`; `embed_dropout` is dropped.
"""

from __future__ import annotations

from typing import Any

from lumos.errors import ConfigError

Config = dict[str, Any]

#: MPT's keys that do not change a step's cost (dropout, initialisation, device, tokenizer,
#: logging, the attention kernel's implementation and its ALiBi / clamp settings)
_MPT_DROPPED = (
    "max_seq_len", "emb_pdrop", "embedding_fraction", "init_config", "init_device",
    "tokenizer_name", "verbose", "learned_pos_emb", "fc_type", "use_pad_tok_in_ffn",
    "attn_pdrop", "attn_impl", "alibi_bias_max", "clip_qkv", "softmax_scale",
    "attn_uses_sequence_id", "sliding_window_size", "rope", "attn_type", "fused_qkv",
)  # fmt: skip


def mpt(data: Config, where: str) -> Config:
    """An MPT config in the common names (module doc)."""
    out = dict(data)
    attn = out.pop("attn_config", None) or {}
    ffn = out.pop("ffn_config", None) or {}
    if not isinstance(attn, dict) or not isinstance(ffn, dict):
        raise ConfigError(f"{where}: attn_config / ffn_config must be mappings")
    if attn.pop("prefix_lm", False):
        raise ConfigError(f"{where}: attn_config.prefix_lm means a prefix-LM attention mask, "
                          "which lumos does not model")  # fmt: skip
    if ffn.get("ffn_type", "mptmlp") != "mptmlp":
        raise ConfigError(
            f"{where}: ffn_config.ffn_type {ffn['ffn_type']!r} is not MPT's own MLP, which is "
            "all lumos reads"
        )
    learned = out.get("learned_pos_emb", True)
    if not attn.pop("alibi", False) and learned:
        out["position"] = "learned"
        out.setdefault("n_positions", out.get("max_seq_len"))
    renames = {"d_model": "hidden_size", "n_heads": "num_attention_heads",
               "n_layers": "num_hidden_layers"}  # fmt: skip
    for old, new in renames.items():
        if old in out:
            out[new] = out.pop(old)
    ratio = out.pop("expansion_ratio", 4)
    if isinstance(out.get("hidden_size"), int) and isinstance(ratio, (int, float)):
        out["intermediate_size"] = int(ratio * out["hidden_size"])
    if "no_bias" in out:
        out["bias"] = not out.pop("no_bias")
    if "kv_n_heads" in attn:
        out["num_key_value_heads"] = attn.pop("kv_n_heads")
    if attn.pop("qk_ln", False):
        out["use_qk_norm"] = True
    attn.pop("qk_gn", None)
    for key in _MPT_DROPPED:
        out.pop(key, None)
        attn.pop(key, None)
    if attn:
        raise ConfigError(f"{where}: attn_config keys {sorted(attn)} are not read by lumos")
    return out


def exaone(data: Config, where: str) -> Config:
    """An EXAONE config in the common names (module doc)."""
    out = dict(data)
    if "layer_norm_epsilon" in out:
        out["rms_norm_eps"] = out.pop("layer_norm_epsilon")
    out.pop("embed_dropout", None)
    return out
