"""What a config.json says of the decoder block beyond its shape: which layers attend over a
sliding window, extra norms, soft-capped logits.

Read from transformers' modeling code and config defaults, as lumos' spec keys:

- `window` every `window_every`-th layer from layer 0 (GPT-OSS, Gemma 2: `layer_types`
  alternating from sliding, or the family's default with a `sliding_window`), or on every
  layer but each `global_every`-th (Gemma 3: `sliding_window_pattern` n, or `layer_types`
  with a full-attention layer every n-th: `Gemma3DecoderLayer.is_sliding = bool((i + 1) %
  n)`);
- `post_norms`: an RMSNorm on the attention output and one on the MLP output before each
  residual add, besides the pre-norms (Gemma 2 / 3: `post_attention_layernorm` /
  `post_feedforward_layernorm`), a family trait;
- `qk_norm`: an RMSNorm over each query and key head before RoPE (Gemma 3, Qwen3, OLMo-2:
  `q_norm` / `k_norm`; Megatron's `qk_layernorm`), a family trait or the config's flag;
- `logit_softcap`: the logits soft-capped (`final_logit_softcapping`, Gemma 2:
  cap·tanh(logits / cap), an element-wise pass over the logits and its backward).

Gemma 2's `attn_logit_softcapping` caps the attention scores inside the fused attention
kernel (flash-attention's `softcap`); it is priced as the same kernel (`BLOCK_IGNORED`,
with the query scaling and the local RoPE base, which cost nothing).
"""

from __future__ import annotations

from typing import Any

from lumos.errors import ConfigError
from lumos.simulator.workload.hf_families import Family

#: accepted and dropped (see module doc)
BLOCK_IGNORED = frozenset(
    ("attn_logit_softcapping", "query_pre_attn_scalar", "rope_local_base_freq")
)
#: names this module reads (the spec's own keys among them)
BLOCK_NAMES = frozenset(
    (
        *BLOCK_IGNORED,
        "final_logit_softcapping",
        "sliding_window_pattern",
        "layer_types",
        "qk_layernorm",
        "use_qk_norm",
        "post_norms",
        "qk_norm",
        "logit_softcap",
        "global_every",
    )
)


def block_traits(
    data: dict[str, Any], family: Family | None, layers: Any, where: str
) -> dict[str, Any]:
    """`data` with the block names above turned into lumos keys. Raises ConfigError naming
    `where` for a layer layout lumos cannot take or a bad value."""
    data = {k: v for k, v in data.items() if k not in BLOCK_IGNORED}
    cap = data.pop("final_logit_softcapping", None)
    if cap is not None:
        if isinstance(cap, bool) or not isinstance(cap, (int, float)) or cap < 0:
            raise ConfigError(f"{where}: final_logit_softcapping must be a number, got {cap!r}")
        if cap and "logit_softcap" not in data:
            data["logit_softcap"] = True
    qk = [data.pop(k) for k in ("qk_layernorm", "use_qk_norm") if k in data]
    if "qk_norm" not in data and (any(qk) or (family is not None and family.qk_norm)):
        data["qk_norm"] = True
    if family is not None and family.post_norms and "post_norms" not in data:
        data["post_norms"] = True
    pattern = data.pop("sliding_window_pattern", None)
    if pattern is not None:
        if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern < 1:
            raise ConfigError(f"{where}: sliding_window_pattern must be a positive integer")
        if pattern > 1 and data.get("sliding_window"):
            data["global_every"] = pattern
    _layer_types(data, family, layers, where)
    return data


def _layer_types(data: dict[str, Any], family: Family | None, layers: Any, where: str) -> None:
    """HF `layer_types` / `sliding_window` as lumos' `window` every `window_every` layers or
    on all but every `global_every`-th; `layer_types` must name every one of the `layers`."""
    types = data.pop("layer_types", None)
    if "sliding_window" in data and data["sliding_window"] is None:
        del data["sliding_window"]
    if types is None:
        unset = "window_every" not in data and "global_every" not in data
        if family is not None and "sliding_window" in data and unset:
            data["window_every"] = family.window_every
        return
    kinds = ("full_attention", "sliding_attention")
    if not isinstance(types, list) or any(t not in kinds for t in types):
        raise ConfigError(
            f"{where}: 'layer_types' other than full_attention / sliding_attention are not modelled"
        )
    if isinstance(layers, int) and len(types) != layers:
        raise ConfigError(f"{where}: 'layer_types' has {len(types)} entries for {layers} layers")
    sliding = [i for i, t in enumerate(types) if t == "sliding_attention"]
    if not sliding:
        data.pop("sliding_window", None)
        return
    if "sliding_window" not in data:
        raise ConfigError(
            f"{where}: 'layer_types' has sliding_attention layers but no sliding_window"
        )
    full = [i for i, t in enumerate(types) if t == "full_attention"]
    every = sliding[1] if len(sliding) > 1 else len(types)
    if sliding == list(range(0, len(types), every)):
        data["window_every"] = every
        return
    n = full[0] + 1
    if full != list(range(n - 1, len(types), n)):
        raise ConfigError(
            f"{where}: 'layer_types' puts sliding-window layers where lumos cannot (every n-th "
            "layer from layer 0, or all but every n-th)"
        )
    data["global_every"] = n
