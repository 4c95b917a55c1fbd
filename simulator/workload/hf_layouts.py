"""Config layouts that name a model's shape their own way, rewritten into the names
`hf_spec` reads.

Most Hugging Face configs spell a decoder's shape with the same names (`hidden_size`,
`num_hidden_layers`, `intermediate_size`, ...); a few model types do not, and `rewrite`
turns those into the common names before anything is read (transformers'
`configuration_<type>.py` and `modeling_<type>.py` for what each name means):

- `dbrx` (DbrxConfig): `d_model`, `n_heads`, `n_layers` at the top, the KV heads in
  `attn_config`, the experts in `ffn_config` (every layer MoE, each expert a GLU
  `ffn_hidden_size` wide with `ffn_act_fn`'s activation, SiLU by default); `max_seq_len`
  is the context limit. Keys of the nested configs lumos does not read (dropout, the
  clamp `clip_qkv`, RoPE's base, router noise and loss weights, and the generation and
  output settings transformers writes into every nested config) are dropped;
- `llama4_text` (Llama4TextConfig): routed experts and the one always-active shared
  expert are `intermediate_size` wide, the dense layers `intermediate_size_mlp`; layer i
  is MoE when it is in `moe_layers`, by default every `interleave_moe_layer_step`-th
  from layer step - 1 (Scout: every layer, Maverick: the odd ones); another `moe_layers`
  list is refused. `attention_chunk_size` is read as `chunk` (see `spec.ModelSpec`);
- `falcon` (FalconConfig): the new decoder architecture (Falcon-40B / 180B) takes its KV
  heads from `num_kv_heads` whatever `multi_query` says (FalconAttention: `num_kv_heads if
  new_decoder_architecture else (1 if multi_query else num_heads)`); `n_head_kv` is the
  older name of `num_kv_heads`; `apply_residual_connection_post_layernorm: true` (the
  residual taken after the norm) is refused;
- `nemotron_h` (NemotronHConfig, Nemotron 3): the MoE layers' shared expert is one MLP
  `moe_shared_expert_intermediate_size` wide whatever `n_shared_experts` says (Nemotron 3
  Nano: 1 and 3712, twice `moe_intermediate_size`; NVIDIA-NeMo/Megatron-Bridge
  `models/nemotronh/nemotron_h_bridge.py` @ 03c781b8 maps that width to Megatron-Core's
  `moe_shared_expert_intermediate_size`, the total shared width, and reads no count), so
  the count is dropped when the width is given; a `layers_block_type` list ("mamba",
  "attention", "mlp", "moe") is the `hybrid_override_pattern` it spells; every norm is
  an RMSNorm (NemotronHRMSNorm; the bridge sets `normalization = "RMSNorm"`), whatever
  epsilon names the config carries (Nemotron 3's `layer_norm_epsilon` and `norm_eps`);
- `opt` (OPTConfig): `ffn_dim` is the FFN width and `enable_bias` the linears' biases;
  `word_embed_proj_dim` other than `hidden_size` (OPT-350m's projections around the
  decoder), `do_layer_norm_before: false` (its post-LN) and `layerdrop` > 0 are refused;
- `internlm` (InternLM v1): its `bias` biases q/k/v/o, never the MLP: `attention_bias`;
- `mpt`, `exaone`, `phi-msft` and `chatglm`: `hf_layouts_renamed`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lumos.errors import ConfigError
from lumos.simulator.workload.hf_layouts_renamed import chatglm, exaone, mpt, phi_msft

Config = dict[str, Any]


def _nested(data: Config, key: str, where: str) -> Config:
    value = data.pop(key, None)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key} must be a mapping, got {value!r}")
    return value


def _dbrx(data: Config, where: str) -> Config:
    out = dict(data)
    attn = _nested(out, "attn_config", where)
    ffn = _nested(out, "ffn_config", where)
    for old, new in (("d_model", "hidden_size"), ("n_heads", "num_attention_heads"),
                     ("n_layers", "num_hidden_layers")):  # fmt: skip
        if old in out:
            out[new] = out.pop(old)
    for key in ("max_seq_len", "emb_pdrop", "resid_pdrop"):
        out.pop(key, None)
    if "kv_n_heads" in attn:
        out["num_key_value_heads"] = attn["kv_n_heads"]
    width = ffn.get("ffn_hidden_size")
    if width is not None:
        out["intermediate_size"] = out["moe_intermediate_size"] = width
    out["num_local_experts"] = ffn.get("moe_num_experts", 4)  # DbrxFFNConfig's defaults
    out["num_experts_per_tok"] = ffn.get("moe_top_k", 1)
    act = ffn.get("ffn_act_fn") or {"name": "silu"}
    out["hidden_act"] = act.get("name") if isinstance(act, dict) else act
    return out


def _llama4_text(data: Config, where: str) -> Config:
    out = dict(data)
    step = out.pop("interleave_moe_layer_step", 1)
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise ConfigError(f"{where}: interleave_moe_layer_step must be a positive integer")
    layers = out.get("num_hidden_layers")
    listed = out.pop("moe_layers", None)
    if listed is not None and isinstance(layers, int):
        expected = list(range(step - 1, layers, step))
        if list(listed) != expected:
            raise ConfigError(
                f"{where}: 'moe_layers' other than every interleave_moe_layer_step-th layer "
                f"from layer {step - 1} is not modelled"
            )
    out["moe_layer_freq"], out["first_k_dense_replace"] = step, step - 1
    expert = out.pop("intermediate_size", None)
    dense = out.pop("intermediate_size_mlp", None)
    if expert is not None:
        out["moe_intermediate_size"] = expert
        out["n_shared_experts"] = 1  # Llama4TextMoe's shared_expert: one MLP of that width
    if dense is not None:
        out["intermediate_size"] = dense
    return out


#: NemotronHConfig's `layers_block_type` names -> the pattern's characters (`hybrid_spec`)
_BLOCKS = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def _nemotron_h(data: Config, where: str) -> Config:
    out = dict(data)
    if out.get("norm") is None and out.get("normalization") is None:
        out["normalization"] = "RMSNorm"
    if out.get("moe_shared_expert_intermediate_size") is not None:
        out.pop("n_shared_experts", None)
    blocks = out.pop("layers_block_type", None)
    if blocks is not None and out.get("hybrid_override_pattern") is None:
        if not isinstance(blocks, list) or any(b not in _BLOCKS for b in blocks):
            raise ConfigError(
                f"{where}: layers_block_type must list {', '.join(_BLOCKS)}, got {blocks!r}"
            )
        out["hybrid_override_pattern"] = "".join(_BLOCKS[b] for b in blocks)
    return out


def _opt(data: Config, where: str) -> Config:
    out = dict(data)
    if "ffn_dim" in out:
        out["intermediate_size"] = out.pop("ffn_dim")
    if "enable_bias" in out:
        bias = out.pop("enable_bias")
        out["attention_bias"] = out["mlp_bias"] = bias
    proj = out.pop("word_embed_proj_dim", None)
    if proj is not None and proj != out.get("hidden_size"):
        raise ConfigError(
            f"{where}: 'word_embed_proj_dim' ({proj}) other than hidden_size means projections "
            "between the embedding and the decoder (OPT-350m), which lumos does not model"
        )
    if out.pop("do_layer_norm_before", True) is not True:
        raise ConfigError(
            f"{where}: 'do_layer_norm_before' false means a post-LN block (OPT-350m), which "
            "lumos does not model"
        )
    for key in ("layer_norm_elementwise_affine", "init_std", "prefix", "output_projection",
                "dropout", "activation_dropout"):  # fmt: skip
        out.pop(key, None)
    return out


def _falcon(data: Config, where: str) -> Config:
    out = dict(data)
    if "n_head_kv" in out:
        out["num_kv_heads"] = out.pop("n_head_kv")
    if out.get("new_decoder_architecture"):
        out.pop("multi_query", None)
    elif out.get("multi_query"):
        out.pop("num_kv_heads", None)
    if out.pop("apply_residual_connection_post_layernorm", False):
        raise ConfigError(
            f"{where}: 'apply_residual_connection_post_layernorm' true takes the residual "
            "after the norm, which lumos does not model"
        )
    return out


def _internlm(data: Config, where: str) -> Config:
    out = dict(data)
    if "bias" in out:  # q/k/v/o only: the MLP has none (modeling_internlm.py)
        out["attention_bias"] = out.pop("bias")
    return out


#: model_type -> its rewrite into the common names
LAYOUTS: dict[str, Callable[[Config, str], Config]] = {
    "falcon": _falcon,
    "dbrx": _dbrx,
    "llama4_text": _llama4_text,
    "nemotron_h": _nemotron_h,
    "opt": _opt,
    "mpt": mpt,
    "exaone": exaone,
    "internlm": _internlm,
    "phi-msft": phi_msft,
    "chatglm": chatglm,
}


def rewrite(kind: object, data: Config, where: str) -> Config:
    """`data` in the common names if model type `kind` has a layout of its own (module
    doc), else as it is. Raises ConfigError naming `where` and the key for what the
    layout cannot express."""
    if isinstance(kind, str) and kind in LAYOUTS:
        return LAYOUTS[kind](data, where)
    return data
