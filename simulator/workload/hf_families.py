"""What a Hugging Face `model_type` fixes that its config.json need not say, and the model
types lumos refuses by name.

A config.json states the shape (layers, widths, heads) but leaves the block to the model's
modeling code: whether the MLP is gated, which norm, which linears have biases, how
positions are encoded, whether the output layer reuses the embedding. `FAMILIES` holds
those traits per `model_type`, read from transformers' `modeling_<type>.py` and the
defaults of its `<Type>Config`; `REFUSED` names the model types whose block lumos cannot
price (state-space or recurrent layers other than a hybrid pattern's, ALiBi, encoders), with
what they are, so that such a config is refused for its architecture before any of its
keys is looked at.

Families that are priced as the plain pre-norm decoder although their block differs in
something that costs next to nothing (the reason is on each entry): OLMo's non-parametric
LayerNorm (its 2·hidden weights a norm are counted), OLMo-2's norms after attention and MLP
instead of before them (the same two RMSNorms over the same activations), Granite's
scalar multipliers of the embedding, residuals and logits (one multiply each, fused into neighbouring kernels), Gemma's
embedding scaled by sqrt(hidden), GLM-4's RoPE on half of each head (`partial_rotary_factor`),
MPT's ALiBi (a per-head bias added inside the attention kernel, `hf_layouts_renamed`).
Phi's first remote-code layout (`phi-msft`) and ChatGLM's (`chatglm`) are transformers'
`phi` and `glm` blocks under other names (`hf_layouts_renamed`).
Model types lumos does not know are refused as such, never priced as a Llama.
"""

from __future__ import annotations

from dataclasses import dataclass

from lumos.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Family:
    """What a Hugging Face `model_type` fixes that its config.json need not say: a gated
    MLP, the norm, (attention, MLP) biases, positions, tied embeddings by default, which
    layers a `sliding_window` without `layer_types` applies to (every n-th), and the
    activation when the config names none, and the block's extra norms (`hf_block`): after
    attention and MLP (`post_norms`), over each query and key head (`qk_norm`); `parallel`:
    attention and MLP side by side when the config does not say (`hf_parallel`), and the
    norms such a block has (`norms`: 1 shared, 2 one a branch)."""

    gated: bool
    norm: str
    bias: tuple[bool, bool] = (False, False)
    position: str = "rope"
    tied: bool = False
    window_every: int = 1
    act: str = "silu"
    post_norms: bool = False
    qk_norm: bool = False
    parallel: bool = False
    norms: int = 2


_LLAMA = Family(True, "rmsnorm")
_PHI = Family(False, "layernorm", bias=(True, True), act="gelu_new", parallel=True, norms=1)
#: HF model_type -> its fixed traits (transformers' modeling_*.py and *Config defaults)
FAMILIES: dict[str, Family] = {
    **dict.fromkeys(("llama", "mistral", "mixtral"), _LLAMA),
    # Qwen3 (dense and MoE): RMSNorm over each query and key head (Qwen3Attention q_norm /
    # k_norm)
    **dict.fromkeys(("qwen3", "qwen3_moe"), Family(True, "rmsnorm", qk_norm=True)),
    **dict.fromkeys(("deepseek", "deepseek_v2", "deepseek_v3"), _LLAMA),
    # Phi-3: fused qkv_proj / gate_up_proj, the same GEMMs; `sliding_window` on every layer
    # (Phi3Model builds a sliding-window causal mask when the config has one)
    "phi3": _LLAMA,
    # OLMo: LayerNorm without weights (OlmoLayerNorm), SwiGLU, no biases, untied
    "olmo": Family(True, "layernorm"),
    # OLMo-2: RMSNorm after attention and after the MLP instead of before them
    # (Olmo2DecoderLayer: the same two norms over the same activations), QK-norm
    "olmo2": Family(True, "rmsnorm", qk_norm=True),
    # Granite: Llama with embedding / attention / residual / logit multipliers (scalars)
    "granite": _LLAMA,
    # Llama 4's text model: its MoE names are read by `hf_layouts.llama4_text`
    "llama4_text": _LLAMA,
    # DBRX: LayerNorm without bias, GLU experts (read by `hf_layouts.dbrx`)
    "dbrx": Family(True, "layernorm"),
    # Gemma: GeGLU (GemmaMLP: down(gelu_tanh(gate) * up)), output layer tied by default
    "gemma": Family(True, "rmsnorm", tied=True, act="gelu_pytorch_tanh"),
    # Gemma 2: norms after attention and MLP besides the ones before (Gemma2DecoderLayer),
    # sliding-window attention on the even layers (`is_sliding = not bool(layer_idx % 2)`)
    "gemma2": Family(
        True, "rmsnorm", tied=True, window_every=2, act="gelu_pytorch_tanh", post_norms=True
    ),
    # Gemma 3's text model: Gemma 2's block with QK-norm, a global layer every
    # `sliding_window_pattern`-th (hf_block)
    "gemma3_text": Family(
        True, "rmsnorm", tied=True, act="gelu_pytorch_tanh", post_norms=True, qk_norm=True
    ),
    "qwen2": Family(True, "rmsnorm", bias=(True, False)),
    "qwen2_moe": Family(True, "rmsnorm", bias=(True, False)),
    "gpt_oss": Family(True, "rmsnorm", bias=(True, True), window_every=2),
    "gpt2": Family(
        False, "layernorm", bias=(True, True), position="learned", tied=True, act="gelu"
    ),
    # GPT-BigCode (SantaCoder, StarCoder): GPT-2's block (GPTBigCodeBlock: ln_1, c_attn /
    # c_proj, ln_2, c_fc / c_proj, all biased; learned positions; tied) with one key/value
    # head under `multi_query` (GPTBigCodeConfig default true, `hf_defaults.DEFAULTS`)
    "gpt_bigcode": Family(
        False, "layernorm", bias=(True, True), position="learned", tied=True, act="gelu"
    ),
    # GPT-NeoX: `use_parallel_residual` (GPTNeoXConfig default True) runs attention on
    # `input_layernorm(x)` and the MLP on `post_attention_layernorm(x)` (GPTNeoXLayer)
    "gpt_neox": Family(False, "layernorm", bias=(True, True), act="gelu", parallel=True),
    # Falcon: `parallel_attn` (FalconConfig default True) with one `input_layernorm`, or
    # `ln_attn` / `ln_mlp` under `new_decoder_architecture` (`hf_parallel`)
    "falcon": Family(False, "layernorm", tied=True, act="gelu", parallel=True, norms=1),
    # GPT-J: attention and MLP on one `ln_1` (GPTJBlock); q/k/v/out without bias, fc_in /
    # fc_out with (GPTJAttention, GPTJMLP)
    "gptj": Family(False, "layernorm", bias=(False, True), act="gelu_new", parallel=True, norms=1),
    # Phi-1 / 1.5 / 2: one `input_layernorm` feeding both (PhiDecoderLayer), every linear
    # biased (q/k/v/dense, fc1/fc2)
    "phi": _PHI,
    # Phi-1.5 / 2's first remote-code layout: the same block (`hf_layouts_renamed.phi_msft`)
    "phi-msft": _PHI,
    # Cohere (Command R): one `input_layernorm` (CohereLayerNorm, no bias) feeding attention
    # and a gated SiLU MLP (CohereDecoderLayer), output layer tied (CohereConfig)
    "cohere": Family(True, "layernorm", tied=True, parallel=True, norms=1),
    # StableLM (2): sequential unless `use_parallel_residual`, which drops
    # `post_attention_layernorm` and feeds the MLP the attention's norm (StableLmDecoderLayer)
    "stablelm": Family(True, "layernorm", norms=1),
    "nemotron": Family(False, "layernorm", act="relu2"),
    # Nemotron-H: Mamba-2, attention and MLP layers by `hybrid_override_pattern`
    # (`hybrid_spec`), RMSNorm, squared-ReLU MLP, attention without position embeddings
    # (NemotronHAttention applies no rotary; Megatron-Bridge's NemotronHBridge sets
    # `position_embedding_type="none"`), untied
    "nemotron_h": Family(False, "rmsnorm", position="none", act="relu2"),
    # StarCoder2: LayerNorm, GeLU c_fc / c_proj, every linear biased (`use_bias`), the
    # output layer tied by default (Starcoder2Config)
    "starcoder2": Family(False, "layernorm", bias=(True, True), tied=True, act="gelu"),
    # OPT: pre-LN (`do_layer_norm_before`), ReLU fc1 / fc2, biases, learned positions, tied
    "opt": Family(False, "layernorm", bias=(True, True), position="learned", tied=True, act="relu"),
    # GLM-4-0414 (Glm4DecoderLayer): RMSNorms after attention and MLP besides the ones
    # before (`post_self_attn_layernorm`, `post_mlp_layernorm`), q/k/v biased, o_proj not
    # (Glm4Attention), fused gate_up_proj SwiGLU; RoPE on half of each head
    # (`partial_rotary_factor` 0.5: priced as RoPE)
    "glm4": Family(True, "rmsnorm", bias=(True, False), post_norms=True),
    # GLM (GlmDecoderLayer, models/glm/modeling_glm.py @ 00d4b3d2): Llama's pre-norm block,
    # RMSNorms, q/k/v biased by `attention_bias`, o_proj and the fused gate_up_proj SwiGLU
    # not; RoPE on half of each head (priced as RoPE). ChatGLM2 / 3 and GLM-4-9B's remote
    # code (`chatglm`) is the same block under Megatron-style names (`hf_layouts_renamed`)
    **dict.fromkeys(("glm", "chatglm"), Family(True, "rmsnorm", bias=(True, False))),
    # GLM-4.5 (Glm4MoeDecoderLayer): the two pre-norms only, q/k/v biased, QK-norm when
    # `use_qk_norm`; DeepSeek-V3's MoE names (`n_routed_experts`, `first_k_dense_replace`,
    # sigmoid routing) without MLA
    "glm4_moe": Family(True, "rmsnorm", bias=(True, False)),
    # Seed-OSS (SeedOssDecoderLayer): Llama's block, q/k/v biased (`attention_bias`), o_proj
    # not (`attention_out_bias`), no MLP bias
    "seed_oss": Family(True, "rmsnorm", bias=(True, False)),
    # InternLM2 (remote code, modeling_internlm2.py): fused `wqkv`, SwiGLU w1 / w3 / w2,
    # RMSNorm, biases by its `bias` key
    "internlm2": _LLAMA,
    # InternLM (v1, remote code modeling_internlm.py): Llama's block, q/k/v/o biased by its
    # `bias` key, the MLP never (InternLMMLP), read as `attention_bias` (`hf_layouts`)
    "internlm": _LLAMA,
    # EXAONE 3.0 / 3.5 (remote code, modeling_exaone.py): Llama's block under GPT-2 names
    # (`num_layers`, `activation_function`, `ln_1` / `ln_2`), its norms RMSNorms whatever
    # its `layer_norm_epsilon` is called (`hf_layouts`)
    "exaone": _LLAMA,
    # ERNIE 4.5 dense (Ernie4_5DecoderLayer): Llama's block, biases by `use_bias`, tied
    "ernie4_5": Family(True, "rmsnorm", tied=True),
    # MPT (MptBlock): LayerNorm, GeLU up / down, one Wqkv, tied, ALiBi instead of positions
    # (`hf_layouts`: priced as causal attention, the bias computed in the kernel)
    "mpt": Family(False, "layernorm", position="none", tied=True, act="gelu"),
}

_SSM = "state-space (Mamba) layers"
#: model types lumos knows it cannot price -> what their block is (refused before any key)
REFUSED: dict[str, str] = {
    "cohere2": "Command R7B's sliding-window layer pattern beside its parallel block",
    "bloom": "ALiBi attention biases and a LayerNorm after the embedding (BLOOM)",
    "qwen3_next": "Gated DeltaNet (linear attention) layers beside gated attention, with "
    "experts (Qwen3-Next)",
    "minimax": "lightning (linear) attention layers beside softmax attention, with experts "
    "(MiniMax-Text-01 / M1)",
    "ernie4_5_moe": "ERNIE 4.5's experts (moe_num_experts, moe_k, moe_layer_start_index / "
    "interval, shared experts) in its own keys, which lumos does not read yet",
    "hunyuan_v1_dense": "Hunyuan's block (its own QK-norm and attention options), whose "
    "modeling code lumos has not read",
    "hunyuan_v1_moe": "Hunyuan's block and experts (Hunyuan-A13B), whose modeling code lumos "
    "has not read",
    "jamba": f"{_SSM} interleaved with attention, and experts (Jamba)",
    "mamba": _SSM,
    "mamba2": _SSM,
    "falcon_mamba": _SSM,
    "falcon_h1": f"{_SSM} beside attention in every layer (Falcon-H1)",
    "zamba": f"{_SSM} with a shared attention block (Zamba)",
    "zamba2": f"{_SSM} with shared attention blocks (Zamba2)",
    "rwkv": "recurrent (RWKV) time-mixing layers instead of attention",
    "rwkv5": "recurrent (RWKV-5) time-mixing layers instead of attention",
    "rwkv6": "recurrent (RWKV-6) time-mixing layers instead of attention",
    "recurrent_gemma": "recurrent (Griffin) layers beside local attention",
    "t5": "an encoder-decoder model",
    "mt5": "an encoder-decoder model",
    "umt5": "an encoder-decoder model",
    "bart": "an encoder-decoder model",
    "bert": "an encoder (bidirectional, no causal LM head)",
    "roberta": "an encoder (bidirectional, no causal LM head)",
}


def family(kind: object, where: str) -> Family:
    """The traits of `model_type` `kind`. Raises ConfigError naming `where` and the model
    type when it is one lumos refuses (`REFUSED`) or does not know."""
    if isinstance(kind, str) and kind in FAMILIES:
        return FAMILIES[kind]
    if isinstance(kind, str) and kind in REFUSED:
        raise ConfigError(
            f"{where}: model_type {kind!r} means {REFUSED[kind]}, which lumos does not model"
        )
    raise ConfigError(
        f"{where}: model_type {kind!r} is not one lumos knows ({', '.join(FAMILIES)}): "
        "its block may differ (parallel attention and MLP, extra norms, other layer kinds) "
        "without a key saying so; write its shape in lumos' keys if it is a plain pre-norm "
        "decoder"
    )
