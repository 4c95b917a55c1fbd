"""Model specs: the shape of a decoder-only transformer (dense or mixture of experts), from YAML
or a built-in name.

`load_model("llama3.1-405b")` reads `models.yaml` (shipped, sources in its header);
`load_model("my.yaml")` reads a user file holding one spec (the same keys at the top level).
Unknown keys are ConfigErrors with a "did you mean". Counting helpers (`params`,
`layer_params`) use the same shapes the generator prices, so MFU and memory agree with it.
A mixture-of-experts model (`experts` > 0, parsed by `moe_spec`) replaces the MLP of its MoE
layers by a router, `experts` expert MLPs of width `moe_ffn` (`top_k` of them active per
token) and an optional always-active shared-expert MLP of width `shared_ffn`. Multi-head
latent attention (`kv_lora` > 0; DeepSeek-V2/V3) replaces the QKV projection by low-rank
down-projections (hidden → `q_lora`, hidden → `kv_lora` + `qk_rope`; replicated over TP),
their RMSNorms and up-projections (→ heads x (`qk_nope` + `qk_rope`) queries, → heads x
(`qk_nope` + `v_head`) keys and values; split over TP by heads), and the output projection
reads heads x `v_head`. Multi-token prediction (`mtp_layers` > 0; DeepSeek-V3, Megatron-Core
`mtp_num_layers`) adds per MTP layer an embedding of the shifted tokens (shared weights), two
norms, a [2·hidden → hidden] projection, one more transformer layer and a final norm before
the shared output layer; `params` leaves them out (as DeepSeek's 671B / 37B do),
`mtp_params` counts them. A hybrid Mamba-2 / Transformer model (Nemotron-H; `pattern`, parsed
by `hybrid_spec`) is a string of Mamba-2, attention and MLP layers, `mamba` its mixer's shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from lumos.errors import ConfigError
from lumos.hwconfigs.fields import REQUIRED, fields, flag, read_json, read_yaml
from lumos.limits import MAX_LAYERS
from lumos.simulator.workload.hybrid_spec import MambaDims, hybrid_layers_params
from lumos.simulator.workload.model_names import builtin_key, closest, file_name, path_exists

BUILTIN = Path(__file__).with_name("models.yaml")


class Mlp(str, Enum):
    """MLP activation: GeLU (GPT), SwiGLU (Llama, Mistral: gated, two up projections),
    GeGLU (Gemma: gated like SwiGLU, GeLU on the gate; the same GEMMs and elementwise
    bytes), squared ReLU (Nemotron-4), ReLU (OPT: ungated, priced as GeLU)."""

    GELU = "gelu"
    SWIGLU = "swiglu"
    GEGLU = "geglu"
    SQUARED_RELU = "squared_relu"
    RELU = "relu"


class Norm(str, Enum):
    LAYERNORM = "layernorm"
    RMSNORM = "rmsnorm"


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Shape of one model; `ffn` is the MLP inner size (per up projection for SwiGLU).
    `head_size`: attention head width when it is not hidden / heads (Qwen3, GPT-OSS); the
    MoE fields are zero for a dense model (see module doc); `window`: sliding-window
    attention span of every `window_every`-th layer (0: none); `chunk`: Llama 4's chunked
    attention (`attention_chunk_size`: a query sees the keys of its own chunk of that many
    tokens), priced as full causal attention, which it is while seq <= chunk
    (`ParallelPlan.check` refuses a longer seq; 0: none); `dropout`: a model with biases
    (GPT-style) trains with dropout, whose masks the memory estimate keeps (False: MPT's
    configs, every pdrop 0). Block traits (`hf_block`): `global_every` (> 0: the window on
    every layer but each `global_every`-th, Gemma 3's pattern, instead of every
    `window_every`-th), `post_norms` (an RMSNorm on the attention and on the MLP output
    before each residual add, Gemma 2 / 3), `qk_norm` (an RMSNorm over each query and key
    head, Qwen3, Gemma 3), `logit_softcap` (the logits soft-capped, Gemma 2). `pattern`: a
    hybrid's layer kinds, one a layer, `mamba` its Mamba-2 mixer (`hybrid_spec`; "": none)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    mlp: Mlp = Mlp.GELU
    norm: Norm = Norm.LAYERNORM
    tied_embeddings: bool = False
    position: str = "rope"
    bias: bool = False
    dropout: bool = True
    seq: int = 2048
    head_size: int = 0
    experts: int = 0
    top_k: int = 0
    moe_ffn: int = 0
    shared_ffn: int = 0
    moe_every: int = 1
    first_dense: int = 0
    window: int = 0
    window_every: int = 2
    global_every: int = 0
    post_norms: bool = False
    qk_norm: bool = False
    logit_softcap: bool = False
    chunk: int = 0
    q_lora: int = 0
    kv_lora: int = 0
    qk_nope: int = 0
    qk_rope: int = 0
    v_head: int = 0
    mtp_layers: int = 0
    pattern: str = ""
    mamba: MambaDims | None = None

    @property
    def head_dim(self) -> int:
        return self.head_size or self.hidden // self.heads

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (see module doc)."""
        return self.kv_lora > 0

    @property
    def qk_dim(self) -> int:
        """Per-head query/key width (MLA: `qk_nope` + `qk_rope`)."""
        return self.qk_nope + self.qk_rope if self.mla else self.head_dim

    @property
    def v_dim(self) -> int:
        """Per-head value width (MLA: `v_head`)."""
        return self.v_head if self.mla else self.head_dim

    @property
    def attention_width(self) -> int:
        """heads x the mean of the QK and V head widths: what one token's QKᵀ and AV cost
        per key (2 x 2 x this FLOPs forward)."""
        return self.heads * (self.qk_dim + self.v_dim) // 2

    @property
    def moe(self) -> bool:
        return self.experts > 0

    def is_moe_layer(self, index: int) -> bool:
        """Whether layer `index` (0-based) holds experts instead of a dense MLP: every
        `moe_every`-th layer from layer `first_dense` (Megatron's integer `moe_layer_freq`
        with `first_dense` 0; DeepSeek's `first_k_dense_replace`; Llama 4 Maverick's odd
        layers: `first_dense` 1, `moe_every` 2)."""
        return (
            self.moe
            and index >= self.first_dense
            and (index - self.first_dense) % self.moe_every == 0
        )

    def is_window_layer(self, index: int) -> bool:
        """Whether layer `index` attends over a sliding window (GPT-OSS, Gemma 2: even
        layers; Gemma 3: all but every sixth)."""
        if self.window <= 0:
            return False
        if self.global_every:
            return (index + 1) % self.global_every != 0
        return index % self.window_every == 0

    @property
    def moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.layers))

    def expert_params(self) -> int:
        """Weights of one expert MLP (up and down projections, biases)."""
        up = self.hidden * self.moe_ffn * (2 if self.gated else 1)
        bias = self.moe_ffn * (2 if self.gated else 1) + self.hidden if self.bias else 0
        return up + self.moe_ffn * self.hidden + bias

    def moe_layer_params(self, active: bool = False) -> int:
        """Weights of one MoE layer: `moe_dense_params` and its routed experts (`active`:
        only the `top_k` one token uses)."""
        routed = (self.top_k if active else self.experts) * self.expert_params()
        return self.moe_dense_params() + routed

    def moe_dense_params(self) -> int:
        """Weights of one MoE layer outside its routed experts: attention, norms, router,
        shared expert."""
        shared = self.hidden * self.shared_ffn * (3 if self.gated else 2)
        return self._attention_params() + self.hidden * self.experts + shared

    def _attention_params(self) -> int:
        """Attention weights and the layer's norms (two, four with `post_norms`, and the
        query / key head norms)."""
        h, d = self.hidden, self.head_dim
        norms = (4 if self.post_norms else 2) * h * (2 if self.norm is Norm.LAYERNORM else 1)
        norms += 2 * self.qk_dim if self.qk_norm else 0
        if self.mla:
            return self.mla_sharded_params() + self.mla_replicated_params() + norms
        qkv = h * (self.heads + 2 * self.kv_heads) * d
        proj = self.heads * d * h
        bias = (self.heads + 2 * self.kv_heads) * d + h if self.bias else 0
        return qkv + proj + norms + bias

    def mla_sharded_params(self) -> int:
        """MLA weights split over TP by heads: query up-projection (or the direct query
        projection without `q_lora`), KV up-projection, output projection."""
        h, n = self.hidden, self.heads
        q_in = self.q_lora or h
        return (
            q_in * n * self.qk_dim
            + self.kv_lora * n * (self.qk_nope + self.v_dim)
            + (n * self.v_dim * h)
        )

    def mla_replicated_params(self) -> int:
        """MLA weights every TP rank holds whole: the down-projections and their norms
        (Megatron-Core's `linear_q_down_proj` / `linear_kv_down_proj`, TELinear
        `parallel_mode="duplicated"`); 0 without MLA."""
        if not self.mla:
            return 0
        h = self.hidden
        q = (h + 1) * self.q_lora  # weight + RMSNorm
        return q + h * (self.kv_lora + self.qk_rope) + self.kv_lora

    @property
    def gated(self) -> bool:
        """A gated MLP (SwiGLU, GeGLU): two up projections, act(gate) x up."""
        return self.mlp in (Mlp.SWIGLU, Mlp.GEGLU)

    def layer_params(self) -> int:
        """Weights of one transformer layer (attention, MLP, two norms, biases)."""
        h = self.hidden
        up = h * self.ffn * (2 if self.gated else 1)
        down = self.ffn * h
        bias = self.ffn + h if self.bias else 0
        return self._attention_params() + up + down + bias

    def mtp_layer_params(self, active: bool = False) -> int:
        """Weights of one multi-token-prediction layer besides the shared embedding and
        output layer: its transformer layer (index `layers`: an MoE layer where the model's
        later layers are), the [2h, h] projection, its three norms."""
        h = self.hidden
        extra = 2 * h * h + 3 * h * (2 if self.norm is Norm.LAYERNORM else 1)
        if not self.is_moe_layer(self.layers):
            return self.layer_params() + extra
        return self.moe_layer_params(active) + extra

    def mtp_params(self, active: bool = False) -> int:
        """All multi-token-prediction weights (0 without MTP); `active` adds the output
        layer each MTP loss uses (DeepSeek's convention for activated parameters)."""
        head = self.vocab * self.hidden if active else 0
        return self.mtp_layers * (self.mtp_layer_params(active) + head)

    def embedding_params(self) -> int:
        """Input embedding (+ learned positions) and, if untied, the output layer."""
        emb = self.vocab * self.hidden + (
            self.seq * self.hidden if self.position == "learned" else 0
        )
        return emb + (0 if self.tied_embeddings else self.vocab * self.hidden)

    def params(self, active: bool = False) -> int:
        """All weights, final norm included; `active`: only those one token uses (the
        `top_k` routed experts of each MoE layer, not all `experts`)."""
        final_norm = self.hidden * (2 if self.norm is Norm.LAYERNORM else 1)
        moe = self.moe_layers
        layers = (self.layers - moe) * self.layer_params() + moe * self.moe_layer_params(active)
        layers = hybrid_layers_params(self) if self.pattern else layers
        return layers + self.embedding_params() + final_norm


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{where} must be a positive integer, got {value!r}")
    return value


def _choice(enum: type[Enum]) -> Any:
    def parse(value: Any, where: str) -> Enum:
        try:
            return enum(value)
        except ValueError:
            known = ", ".join(str(m.value) for m in enum)
            raise ConfigError(f"{where} must be one of {known}, got {value!r}") from None

    return parse


def _position(value: Any, where: str) -> str:
    if value not in ("rope", "learned", "none"):  # none: Nemotron-H's attention (NoPE)
        raise ConfigError(f"{where} must be rope, learned or none, got {value!r}")
    return str(value)


_TABLE = {
    "name": (lambda v, w: str(v), ""),
    "layers": (_positive_int, REQUIRED),
    "hidden": (_positive_int, REQUIRED),
    "heads": (_positive_int, REQUIRED),
    "kv_heads": (_positive_int, None),
    "ffn": (_positive_int, None),
    "vocab": (_positive_int, REQUIRED),
    "mlp": (_choice(Mlp), Mlp.GELU),
    "norm": (_choice(Norm), Norm.LAYERNORM),
    "tied_embeddings": (flag, False),
    "position": (_position, "rope"),
    "bias": (flag, False),
    "dropout": (flag, True),
    "seq": (_positive_int, 2048),
    "post_norms": (flag, False),
    "qk_norm": (flag, False),
    "logit_softcap": (flag, False),
    "global_every": (lambda v, w: _count_or_zero(v, w), 0),
}


def _count_or_zero(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where} must be a non-negative integer, got {value!r}")
    return value


def model_from_dict(data: dict[str, Any], where: str, name: str = "") -> ModelSpec:
    """A `ModelSpec` from a mapping of lumos' keys or a Hugging Face / Megatron config's
    (dense names: `hf_spec`; mixture-of-experts and attention-shape keys: `moe_spec`).
    Raises ConfigError naming `where`, also for an architecture lumos does not model
    (`hf_spec.UNMODELLED`, `moe_spec.UNMODELLED`)."""
    from lumos.simulator.workload import hybrid_spec, moe_spec
    from lumos.simulator.workload.hf_spec import lumos_keys

    moe_names = (*(n for names in moe_spec.ALIASES.values() for n in names), *moe_spec.UNMODELLED)
    data = lumos_keys(data, where, (*moe_names, *hybrid_spec.NAMES))
    data, hybrid = hybrid_spec.hybrid_fields(data, where)
    data, moe = moe_spec.moe_fields(data, where)
    values = fields(data, _TABLE, where)
    values |= moe | hybrid
    values["name"] = values["name"] or name
    MAX_LAYERS.check(values["layers"] + values["mtp_layers"], f"{where}: layers (decoder + MTP)")
    values["kv_heads"] = values["kv_heads"] or values["heads"]
    values["ffn"] = values["ffn"] or 4 * values["hidden"]
    if values["experts"]:
        values["moe_ffn"] = values["moe_ffn"] or values["ffn"]
        if values["shared_ffn"] < 0:  # a count of shared experts, each moe_ffn wide
            values["shared_ffn"] = -values["shared_ffn"] * values["moe_ffn"]
    if values["kv_lora"]:  # MLA: every head has its own keys and values
        values["kv_heads"] = values["heads"]
    heads_split = (
        values["hidden"] % values["heads"] == 0 or values["head_size"] or values["kv_lora"]
    )
    if not heads_split or values["heads"] % values["kv_heads"]:
        raise ConfigError(
            f"{where}: hidden ({values['hidden']}) must divide by heads ({values['heads']}) "
            f"and heads by kv_heads ({values['kv_heads']})"
        )
    spec = ModelSpec(**values)
    hybrid_spec.check_hybrid(spec, where)
    return spec


def builtin_models() -> list[str]:
    """Names of the shipped model specs."""
    return sorted(read_yaml(BUILTIN))


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A built-in spec by name (`gpt3-175b`, `llama3.1-405b`, ...) or one from a file: a
    lumos YAML spec or a model's config.json (Hugging Face, Megatron; `hf_spec`).

    A `Path`, an existing file, or a name ending in .json / .yaml / .yml or holding a "/"
    is a file (an existing file wins over a built-in of the same name); a folder holding a
    config.json (a Hugging Face download) is that file. Raises ConfigError for an unknown
    name (listing the built-ins) or a bad file (naming it).
    """
    text = str(name_or_path)
    path = Path(text)
    if path_exists(path) and path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
        text, name_or_path = str(path), path
    table = read_yaml(BUILTIN)
    is_file = isinstance(name_or_path, Path) or path_exists(path)
    key = None if is_file else builtin_key(text, table)
    if key is None and (
        isinstance(name_or_path, Path)
        or text.endswith((".json", ".yaml", ".yml"))
        or "/" in text
        or is_file
    ):
        reader = read_json if path.suffix.lower() == ".json" else read_yaml
        return model_from_dict(reader(path, "model spec"), str(path), file_name(path))
    if key is None:
        near = closest(text, table)
        hint = f"did you mean {' or '.join(map(repr, near))}? " if near else ""
        raise ConfigError(
            f"unknown model {text!r}; {hint}built-ins: {', '.join(sorted(table))}; "
            "or give a model spec YAML or a config.json"
        )
    return model_from_dict(table[key], f"{BUILTIN.name}: {key}", key)
