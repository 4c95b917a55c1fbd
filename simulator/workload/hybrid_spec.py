"""Hybrid Mamba-2 / Transformer models (Nemotron-H): the layer pattern and the Mamba-2
mixer's dimensions of a model spec, from lumos' keys or a config.json's names.

A hybrid decoder is a string of layer kinds, one character a layer (Megatron-Core's
`hybrid_override_pattern`, megatron/core/ssm/mamba_hybrid_layer_allocation.py): `M` a
Mamba-2 layer (norm, `MambaMixer`, residual add), `*` a self-attention layer (norm,
attention, residual; no MLP), `-` an MLP layer (norm, MLP, residual). `layers` is the
pattern's length (Megatron asserts `num_layers == len(pattern)`), `E` a mixture-of-experts
layer (norm, the MoE MLP of the model's `experts` keys, residual; Nemotron 3). The mixer's keys
(`MambaDims`): `mamba_heads` (nheads), `mamba_head_dim` (P), `ssm_state` (N, d_state),
`mamba_groups` (G: the heads of a group share one B and one C), `conv_kernel` (the
depthwise causal convolution's width) and `chunk_size` (Q, the SSD scan's chunk); d_inner =
heads x head_dim. Unset, they take Megatron-Core's defaults (TransformerConfig
`mamba_state_dim` 128, `mamba_head_dim` 64, `mamba_num_groups` 8, d_inner = 2 x hidden;
MambaMixer `d_conv=4`, `chunk_size=128`). Hugging Face (`nemotron_h`: `ssm_state_size`,
`n_groups`, `conv_kernel`, `chunk_size`, `expand`) and Megatron names are accepted
(`ALIASES`). What lumos does not model is refused by name: other layer kinds, a
ratio-allocated hybrid without a pattern, projection biases, LatentMoE (Nemotron 3 Super's
`moe_latent_size`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lumos.errors import ConfigError

if TYPE_CHECKING:
    from lumos.simulator.workload.spec import ModelSpec

#: the layer kinds a pattern may hold (module doc)
KINDS = {"M": "Mamba-2", "*": "self-attention", "-": "MLP", "E": "mixture-of-experts"}
#: lumos key -> accepted names (first: lumos' own)
ALIASES: dict[str, tuple[str, ...]] = {
    "pattern": ("pattern", "hybrid_override_pattern", "hybrid_layer_pattern"),
    "mamba_heads": ("mamba_heads", "mamba_num_heads"),
    "mamba_head_dim": ("mamba_head_dim",),
    "ssm_state": ("ssm_state", "ssm_state_size", "mamba_state_dim", "mamba_d_state"),
    "mamba_groups": ("mamba_groups", "n_groups", "mamba_num_groups", "mamba_n_groups"),
    "conv_kernel": ("conv_kernel", "mamba_d_conv"),
    "chunk_size": ("chunk_size", "mamba_chunk_size"),
    "expand": ("expand", "mamba_expand"),
}
#: accepted and dropped: the mixer's numerics and inference settings (dt range and floor,
#: the conv's SiLU, a bias on the conv, which is counted; FP32 residuals, kernel choice)
IGNORED = frozenset((
    "mamba_hidden_act", "use_conv_bias", "mamba_conv_bias", "rescale_prenorm_residual",
    "residual_in_fp32", "use_mamba_kernels", "num_logits_to_keep", "time_step_min",
    "time_step_max", "time_step_floor", "time_step_limit", "mamba_dt_min", "mamba_dt_max",
    "mamba_dt_limit", "mamba_dt_init_floor", "mamba_ssm_cache_dtype", "is_hybrid_model",
))  # fmt: skip
#: keys of hybrids lumos does not model -> what they are (refused when set)
UNMODELLED = {
    "hybrid_attention_ratio": "layers allocated by ratio; give hybrid_override_pattern",
    "hybrid_mlp_ratio": "layers allocated by ratio; give hybrid_override_pattern",
    "mamba_proj_bias": "biases on the Mamba in/out projections (Megatron-Core asserts none)",
    "moe_latent_size": "LatentMoE (experts on a latent width between down and up projections)",
}
NAMES = frozenset({n for group in ALIASES.values() for n in group} | IGNORED | set(UNMODELLED))
#: Megatron-Core's defaults (module doc)
_DEFAULTS = {"ssm_state": 128, "mamba_head_dim": 64, "mamba_groups": 8, "conv_kernel": 4}
_DEFAULTS |= {"chunk_size": 128, "expand": 2}


@dataclass(frozen=True, slots=True)
class MambaDims:
    """One Mamba-2 mixer's shape (module doc)."""

    heads: int
    head_dim: int
    state: int
    groups: int
    conv_kernel: int = 4
    chunk: int = 128

    @property
    def inner(self) -> int:
        """d_inner: heads x head_dim (x, z and the scan's output are this wide)."""
        return self.heads * self.head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the causal convolution: x, B and C."""
        return self.inner + 2 * self.groups * self.state

    @property
    def in_proj_width(self) -> int:
        """Output width of in_proj: z, x, B, C and one dt per head."""
        return 2 * self.inner + 2 * self.groups * self.state + self.heads

    def params(self, hidden: int) -> int:
        """The mixer's weights (MambaMixer): in_proj, the depthwise conv (weight and bias),
        dt_bias, A_log and D per head, the gated RMSNorm's weight, out_proj."""
        conv = self.conv_dim * (self.conv_kernel + 1)
        return hidden * self.in_proj_width + conv + 3 * self.heads + self.inner * (1 + hidden)


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where} must be a positive integer, got {value!r}")
    return value


def _take(data: dict[str, Any], key: str, where: str) -> Any:
    """The value `key`'s names give (popped; None if none); two that differ are an error."""
    given = [n for n in ALIASES[key] if n in data and data[n] is not None]
    if len({repr(data[n]) for n in given}) > 1:
        raise ConfigError(f"{where}: {given[0]!r} and {given[1]!r} both give {key!r}")
    values = [data.pop(n) for n in ALIASES[key] if n in data]
    return next((v for v in values if v is not None), None)


def hybrid_fields(data: dict[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the other keys, {"pattern", "mamba"}); `layers` is filled from the pattern when
    the mapping has none. Raises ConfigError for an unmodelled hybrid, a pattern that does
    not match `layers`, or mixer keys without a pattern."""
    for key, what in UNMODELLED.items():
        if data.get(key) not in (None, 0, False, 0.0):
            raise ConfigError(f"{where}: {key!r} means {what}, which lumos does not model")
    rest = {k: v for k, v in data.items() if k not in IGNORED and k not in UNMODELLED}
    pattern = _take(rest, "pattern", where)
    dims = {k: _take(rest, k, where) for k in ALIASES if k != "pattern"}
    if pattern is None:
        given = [k for k, v in dims.items() if v is not None]
        if given:
            raise ConfigError(f"{where}: {given[0]!r} needs a hybrid layer pattern")
        return rest, {"pattern": "", "mamba": None}
    if not isinstance(pattern, str) or not pattern:
        raise ConfigError(f"{where}: the hybrid pattern must be a non-empty string")
    bad = sorted(set(pattern) - set(KINDS))
    if bad:
        raise ConfigError(
            f"{where}: the hybrid pattern holds layer kind {bad[0]!r}, which lumos does not "
            "model (M Mamba-2, * attention, - MLP, E mixture of experts)"
        )
    layers = rest.get("layers")  # hf_spec has renamed num_hidden_layers / num_layers
    if layers is None:
        rest["layers"] = len(pattern)
    elif layers != len(pattern):
        raise ConfigError(f"{where}: the hybrid pattern has {len(pattern)} layers, not {layers}")
    return rest, {
        "pattern": pattern,
        "mamba": _mamba(dims, rest, where) if "M" in pattern else None,
    }


def _mamba(dims: dict[str, Any], rest: dict[str, Any], where: str) -> MambaDims:
    """The mixer's shape from the given keys and Megatron-Core's defaults (module doc)."""
    values = {k: _count(v, f"{where}: {k}") for k, v in dims.items() if v is not None}
    values = _DEFAULTS | values
    heads = values.get("mamba_heads")
    if heads is None:  # d_inner = expand x hidden
        hidden = _count(rest.get("hidden"), f"{where}: hidden")
        heads = values["expand"] * hidden // values["mamba_head_dim"]
    if heads % values["mamba_groups"]:
        raise ConfigError(
            f"{where}: mamba heads ({heads}) must divide by the groups ({values['mamba_groups']})"
        )
    return MambaDims(
        heads,
        values["mamba_head_dim"],
        values["ssm_state"],
        values["mamba_groups"],
        values["conv_kernel"],
        values["chunk_size"],
    )


def kind_params(model: ModelSpec, kind: str) -> int:
    """Weights of one layer of `kind` outside its routed experts, its pre-norm included: a
    Mamba-2 layer's mixer, an attention layer's attention (the transformer layer's less its
    MLP norm), an MLP layer's MLP (the transformer layer's less its attention half, plus
    one norm), an MoE layer's router (hidden x experts) and shared expert."""
    norm = model.hidden * (2 if model.norm.value == "layernorm" else 1)
    if kind == "M":
        assert model.mamba is not None
        return model.mamba.params(model.hidden) + norm
    if kind == "E":
        shared = model.hidden * model.shared_ffn * (3 if model.gated else 2)
        return norm + model.hidden * model.experts + shared
    attention = model.attention_params()  # attention and the layer's two norms
    if kind == "*":
        return attention - norm
    return model.layer_params() - attention + norm


def hybrid_layers_params(model: ModelSpec, active: bool = False) -> int:
    """All decoder layers' weights of a hybrid model (`kind_params` per layer, and each MoE
    layer's routed experts: all of them, or the `top_k` one token uses when `active`)."""
    counts = Counter(model.pattern)
    routed = counts["E"] * (model.top_k if active else model.experts) * model.expert_params()
    return routed + sum(n * kind_params(model, k) for k, n in counts.items())


def check_hybrid(model: ModelSpec, where: str) -> None:
    """Raise ConfigError when a hybrid pattern meets a trait lumos does not model with it,
    or its `E` layers and the model's experts do not go together."""
    if model.pattern and model.moe != ("E" in model.pattern):
        what = "experts need E layers" if model.moe else "E layers need experts and top_k"
        raise ConfigError(f"{where}: a hybrid pattern's {what}")
    traits = {
        "moe_every / first_dense (the pattern places the MoE layers)": (
            model.moe_every != 1 or model.first_dense > 0
        ),
        "multi-head latent attention": model.mla,
        "multi-token prediction": model.mtp_layers > 0,
        "sliding-window attention": model.window > 0,
        "post-norms": model.post_norms,
    }
    given = [name for name, on in traits.items() if on]
    if model.pattern and given:
        raise ConfigError(f"{where}: a hybrid pattern with {given[0]} is not modelled")


def hybrid_flops_per_sequence(model: ModelSpec, seq: int) -> float:
    """Model FLOPs of one sequence, NVIDIA's convention for Nemotron-H (NVIDIA/dgxc-benchmarking
    `nemotronh/README.md` @ 1f6d9f40, "Notes"): 6 x the multiply-adds of the MLP layers
    (s·h·ffn twice), the attention layers (s·h·d·(heads + kv_heads), twice; 2·s²·heads·d,
    full, not causal), the Mamba layers (in_proj and out_proj s·h·(3·d_inner + 2·G·N +
    heads); the SSD scan s·d_inner·Q + 2·s·d_inner·N + s·Q·N·G) and the output layer
    (s·h·V); the embedding lookup is not counted. An MoE layer counts its `top_k` routed
    experts and its shared expert as MLPs, the router not (Megatron-Bridge
    `training/utils/flop_utils.py` @ a5b3b5a4, `moe_layer_flops`)."""
    s, h, n = seq, model.hidden, Counter(model.pattern)
    width = model.heads * model.head_dim
    g = 2 if model.gated else 1
    mlp = s * h * (model.ffn * g + model.ffn)
    moe = s * h * (model.top_k * model.moe_ffn + model.shared_ffn) * (g + 1)
    attn = 2 * s * h * model.head_dim * (model.heads + model.kv_heads) + 2 * s * s * width
    mamba = 0.0
    if model.mamba is not None:
        m = model.mamba
        proj = s * h * (3 * m.inner + 2 * m.groups * m.state + m.heads)
        scan = s * m.inner * m.chunk + 2 * s * m.inner * m.state
        mamba = proj + scan + s * m.chunk * m.state * m.groups
    head = s * h * model.vocab
    return 6.0 * (n["-"] * mlp + n["E"] * moe + n["*"] * attn + n["M"] * mamba + head)
