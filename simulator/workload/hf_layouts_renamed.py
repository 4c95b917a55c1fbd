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
  `layer_norm_epsilon`; `embed_dropout` is dropped;
- `phi-msft` (the remote-code layout microsoft/phi-1_5 and phi-2 first shipped): the same
  block as transformers' `phi` — transformers' `models/phi/convert_phi_weights_to_hf.py`
  (@ 15ea02a2) loads those checkpoints into `PhiForCausalLM` with `strict=True`, renaming
  only (`mixer.Wqkv` -> q/k/v, `out_proj` -> `dense`, `ln` -> `input_layernorm`,
  `lm_head.ln` -> `final_layernorm`, `lm_head.linear` -> `lm_head`). `n_head_kv` is the
  key/value heads (None: as many as the heads), `rotary_dim` RoPE's width (priced as
  RoPE); `flash_attn`, `flash_rotary`, `fused_dense` choose kernels for the same
  arithmetic and are dropped; an `img_processor` (a vision tower) is refused;
- `chatglm` (ChatGLM2 / 3, GLM-4-9B's remote code, ChatGLMConfig): transformers'
  `models/glm/convert_glm_weights_to_hf.py` (@ 02ae570b) loads such a checkpoint into
  `GlmForCausalLM` with `strict=True` by renames (`query_key_value` -> `qkv_proj`,
  `dense_h_to_4h` -> `gate_up_proj`, ...) and reads its config as `padded_vocab_size` ->
  vocab, `ffn_hidden_size` -> the SwiGLU width, `num_layers`, `kv_channels` -> head size,
  `multi_query_group_num` key/value heads when `multi_query_attention` (else every head),
  `add_qkv_bias` -> q/k/v biases, `seq_length` -> `max_position_embeddings` (the context
  limit, not a training length), `layernorm_epsilon` -> the RMSNorms' epsilon. GlmDecoderLayer
  (models/glm/modeling_glm.py @ 00d4b3d2) is Llama's pre-norm block with RMSNorms, q/k/v
  biased, o_proj and the MLP not, RoPE on half of each head (priced as RoPE). What it
  cannot hold is refused: `rmsnorm: false` (LayerNorms), `add_bias_linear: true` (biases on
  o_proj and the MLP), `apply_residual_connection_post_layernorm: true`, a P-tuning prefix
  (`pre_seq_len`). Kernel and numerics switches are dropped.
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


#: phi-msft's kernel choices (the same arithmetic: module doc)
_PHI_MSFT_DROPPED = ("flash_attn", "flash_rotary", "fused_dense", "checkpointing")


def phi_msft(data: Config, where: str) -> Config:
    """A `phi-msft` config in the common names (module doc)."""
    out = dict(data)
    if out.pop("img_processor", None) is not None:
        raise ConfigError(
            f"{where}: model_type 'phi-msft' with an 'img_processor' means a vision tower "
            "beside the text model, which lumos does not model"
        )
    kv = out.pop("n_head_kv", None)
    if kv is not None:
        out["num_key_value_heads"] = kv
    for key in _PHI_MSFT_DROPPED:
        out.pop(key, None)
    return out


#: ChatGLM's kernel, numerics and inference switches (the same arithmetic)
_CHATGLM_DROPPED = (
    "apply_query_key_layer_scaling", "attention_softmax_in_fp32", "bias_dropout_fusion",
    "fp32_residual_connection", "original_rope", "rope_ratio", "post_layer_norm",
    "quantization_bit", "prefix_projection", "interleaved_qkv",
)  # fmt: skip


def chatglm(data: Config, where: str) -> Config:
    """A `chatglm` config in the common names (module doc)."""
    out = dict(data)
    refused = {
        "rmsnorm": (False, "LayerNorms where GLM's block has RMSNorms"),
        "add_bias_linear": (True, "biases on the attention output and the MLP"),
        "apply_residual_connection_post_layernorm": (True, "the residual taken after the norm"),
    }
    for key, (bad, what) in refused.items():
        if out.get(key) is bad:
            raise ConfigError(
                f"{where}: model_type 'chatglm' with {key!r} {str(bad).lower()} means {what}, "
                "which transformers' GLM block (and lumos) does not hold"
            )
    if out.pop("pre_seq_len", None):
        raise ConfigError(
            f"{where}: model_type 'chatglm' with 'pre_seq_len' means a P-tuning prefix encoder, "
            "which lumos does not model"
        )
    out.pop("rmsnorm", None)
    out.pop("add_bias_linear", None)
    out.pop("apply_residual_connection_post_layernorm", None)
    out["rms_norm_eps"] = out.pop("layernorm_epsilon", 1e-5)
    grouped = out.pop("multi_query_attention", False)
    groups = out.pop("multi_query_group_num", 1)
    if grouped:
        out["num_key_value_heads"] = groups
    if "seq_length" in out:
        out["max_position_embeddings"] = out.pop("seq_length")
    if "padded_vocab_size" in out:  # ChatGLMConfig sets vocab_size to it
        out.pop("vocab_size", None)
    for key in _CHATGLM_DROPPED:
        out.pop(key, None)
    return out
