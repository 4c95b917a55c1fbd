"""Framework kernel profiles: which kernels a training framework runs for the same layer.

The generated layer is priced by one cost model whatever framework runs it; what differs
between frameworks is *what kernels run*, and each difference is kernel-level (a kernel
more or less, bytes it moves, an attention kernel, what a collective waits for). A plan's
`framework` names a `Profile`:

* ``megatron`` (default): Megatron-Core / NeMo with Transformer Engine — fused norm, RoPE
  and activation kernels (one read and one write each), cuDNN fused attention, TE FP8
  casts fused into the norms (only the projection / FC2 inputs and the gradients cast
  alone), userbuffers TP overlap (`layer.UB_*`), TP backward overlaps (input re-gather
  under dgrad, dgrad reduce-scatter under wgrad), selective recompute = core attention,
  ZeRO / FSDP on flat buffers.
* ``torchtitan``: torchtitan (Dec 2024, commit 9dec370) in eager PyTorch — its Llama code
  runs RMSNorm, RoPE and SwiGLU as separate aten ops (`EAGER`, bytes counted op by op from
  `torchtitan/models/norms.py` RMSNorm and `llama/model.py` apply_rotary_emb / repeat_kv /
  FeedForward, backward from their autograd formulas); attention is PyTorch SDPA, whose
  H100 backend in that nightly is FlashAttention-2 (cuDNN attention opt-in: pytorch#138522;
  pytorch#142132 measured SDPA 329 vs cuDNN 631 TFLOP/s forward on an H100 with the
  2.6.0.dev20241204 nightly; FlashAttention-3 paper, Fig. backward hdim 128 seq 8k:
  FA2 318 vs cuDNN 518 TFLOP/s) — `ATTENTION` holds these ratios; FSDP2 copies
  parameters out of the all-gather buffer on the compute stream and gradients into the
  reduce-scatter buffer, reducing in FP32 (torchtitan's default
  `mixed_precision_reduce = float32`); GQA's K/V heads are materialised by `repeat_kv`;
  TP backward without overlap (DTensor saves the gathered input and reduce-scatters the
  input gradient after both matmuls); `tp_comm_overlap` is PyTorch's async TP, which
  decomposes the forward's all-gather-matmul / matmul-reduce-scatter on the copy engines
  (no SMs held; the async-TP post reports forward-pass speed-ups, the backward keeps its
  collectives); selective recompute is torchtitan's "op" policy (every second matmul and
  every non-matmul op recomputed, attention saved; the parity alternates per step, so
  the mean step re-runs half of each linear); FP8 is torchao's dynamic per-tensor
  scaling: every linear casts its own input and output gradient and transposes both FP8
  operands for the weight-gradient GEMM; context parallelism is PyTorch's
  `context_parallel` (`torch_cp`: K/V all-gathered, FP32 merges and dK/dV ring, `cp_torch`);
  FSDP under pipeline parallelism keeps the stage's parameters gathered and reduces FP32
  gradients after the last micro-batch (`fsdp_pp`), and layers fall on the stages as
  torchtitan's `generate_split_points` puts them (`pp_split`, `pipesplit.torchtitan_split`).
* ``torchtitan-compile``: the same with `torch.compile` per block — Inductor fuses each
  element-wise chain into one kernel (the fused byte counts) and AOTAutograd's CSE
  shares one FP8 cast between linears reading the same input.
* ``olmo-core``: Ai2's OLMo-core trainer (late 2024: `Transformer.apply_compile`,
  `apply_fsdp`, `Trainer._train_batch`): torchtitan's stack by its own account
  ("adapted from" torchtitan's `parallelize_llama.py`) — FSDP2 `fully_shard` per block
  with param BF16 / reduce FP32, `torch.compile` per block, SDPA attention (`llama_like`
  with compile sets `use_flash=False`), torchao float8 linears — so
  ``torchtitan-compile``'s kernels, but the loss is `fused_cross_entropy_loss`
  (`fused_loss=True` in the official scripts: flash_attn's Triton cross-entropy,
  `FUSED_LOSS_BYTES`) instead of torchtitan's eager one.
* ``hf-eager``: a Hugging Face Transformers model class trained in eager PyTorch (the
  Trainer / Accelerate, under DeepSpeed ZeRO or PyTorch FSDP1), on its
  `attn_implementation="flash_attention_2"` path (huggingface/transformers
  `src/transformers/models/llama/modeling_llama.py` @ 00227283): `LlamaRMSNorm` is the same
  FP32 op chain as torchtitan's RMSNorm, `LlamaMLP` the same `act_fn(gate) * up`, the loss
  PyTorch's cross-entropy on `logits.float()` (torchtitan's eager loss); RoPE is
  `apply_rotary_pos_emb`'s `q * cos + rotate_half(q) * sin` (`EAGER["rope_rotate_half"]`);
  attention is flash-attn 2's `flash_attn_func` on the KV heads as they are
  (`LlamaFlashAttention2` calls no `repeat_kv`, which only its SDPA / eager classes do); no
  FSDP2 copy-out (DeepSpeed's ZeRO-3 and FSDP1 gather into the parameters' own storage) and
  no Megatron TP overlaps; the vocabulary unpadded (`nn.Embedding(vocab_size)`).
* ``llm-foundry``: MosaicML llm-foundry's MPT under Composer and PyTorch FSDP1 (the
  benchmark sweep of `scripts/train/benchmarking/`): eager PyTorch, but MPT's ops are
  single kernels — `low_precision_layernorm` is `F.layer_norm` in BF16 with autocast off
  (one native kernel), GeLU one `nn.GELU` op, one fused `Wqkv` linear — so the fused byte
  counts stand; attention is `attn_impl: flash` (submit_benchmarks.py's default, the
  `gpu-flash2` install: FlashAttention-2, `ATTENTION["fa2"]`) on unpadded tokens, whose
  gathers and scatters around the kernel are copies (`unpad`, `UNPAD`); the loss is
  `fused_crossentropy` (flash_attn's cross-entropy kernel: one read of the BF16 logits
  forward, read + write backward); FSDP1 FULL_SHARD with Composer's `mixed_precision:
  DEFAULT` (param BF16, reduce FP32): parameters are views of the gathered flat buffer
  (no copy-out), each layer's unsharded gradient is cast to FP32 and pre-divided on the
  post-backward stream before an FP32 reduce-scatter (`fsdp1_fp32_reduce`); FP8 is
  `fc_type: te` under Composer's `te.fp8_autocast`: each `te.Linear` casts its own input
  (no norm / activation to fuse into) and, called without `is_first_microbatch`, re-casts
  its weight on every forward (`unfused_casts`). MPT's linears carry biases (`no_bias:
  false`): a BF16 `nn.Linear`'s bias gradient is its own reduction over the tokens
  (`bias_sum`; TE fuses it into the GEMM epilogue or the FP8 cast-transpose).
* ``automodel``: NVIDIA NeMo AutoModel's own MoE models (Qwen3 MoE, GPT-OSS, DeepSeek-V3,
  ...) on their Transformer Engine backend, as its benchmark configs run them
  (NVIDIA-NeMo/Automodel examples/benchmark/configs/qwen3_moe_30b_te_deepep.yaml @
  092af93: `BackendConfig` attn te, linear te, rms_norm te, enable_deepep): TE's fused
  norms and linears and cuDNN attention, so ``megatron``'s kernels, the experts' grouped
  GEMMs and DeepEP dispatch through AutoModel's copy of Megatron-Core's flex token
  dispatcher (nemo_automodel/components/moe/megatron/token_dispatcher.py); but the data
  parallelism is PyTorch FSDP2 `fully_shard` per block, param BF16 / reduce FP32
  (nemo_automodel/components/moe/parallelizer.py `apply_fsdp` @ 4a37629), the experts
  their own unit over the EP-shard mesh (`fsdp_moe`), the vocabulary unpadded. Not
  modelled (kept as ``megatron``'s): its loss (`MaskedCrossEntropy`, `fp32_upcast`
  false) and `reshard_after_forward` False (parameters kept gathered from forward to
  backward: `parallelize_model`'s default there; whether the recipe passes it through
  was not checked); no TP overlap (AutoModel refuses TP for these models).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from lumos.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Eager:
    """An unfused element-wise chain: bytes moved per element and kernels launched."""

    bytes_per_element: float
    kernels: int


#: Eager op chains of torchtitan's Llama (per element of the tensor the op works on):
#: RMSNorm forward x.float, pow, mean, mul(rsqrt), type_as, mul(weight) (+2 tiny [T,1]
#: ops) = 6+8+4+8+6+4 B; backward = weight mul and its sum 12, cast 6, mul/sum 24, mean
#: expand 4, pow 20, grad accumulate 12, cast 6. RoPE per q/k element: float 6, complex
#: mul 8, type_as 6 (backward the same chain reversed). SwiGLU per FFN element: silu 4 +
#: mul 6; backward two muls 12 + silu 6. Cross-entropy per logit: float 6, log_softmax 8
#: (backward: nll 4, log_softmax 12, cast 6).
#: Hugging Face's RoPE (`apply_rotary_pos_emb`, `rotate_half`) per q / k element: q * cos 4,
#: neg of the second half 2, cat 4, * sin 4, add 6 = 20 B in 5 kernels; backward from the
#: autograd formulas: the two products' gradients 4 + 4, neg 2, each half-slice's gradient
#: into a zero tensor (zeros 2 + copy 2, twice) and two gradient accumulations 6 + 6 = 30 B
#: in 9 kernels.
EAGER = {
    "rmsnorm": (Eager(36, 8), Eager(84, 14)),
    "rope": (Eager(20, 3), Eager(20, 3)),
    "rope_rotate_half": (Eager(20, 5), Eager(30, 9)),
    "swiglu": (Eager(10, 2), Eager(18, 3)),
    "cross_entropy": (Eager(14, 2), Eager(22, 3)),
}
#: Megatron-Core's unfused vocab-parallel cross-entropy (`cross_entropy_loss_fusion` off,
#: its default; megatron/core/tensor_parallel/cross_entropy.py) per logit: forward
#: `.float()` 6, max 4, in-place subtract of the max 8, exp 8, sum 4, divide 8; backward
#: the in-place multiply by the loss gradient 8 and the cast back to BF16 6
UNFUSED_CROSS_ENTROPY = (Eager(38, 6), Eager(14, 2))
#: SDPA's FlashAttention-2 over the hardware file's fused-attention (cuDNN / FA3-class)
#: efficiencies, forward and backward (sources in the module doc). Measured on H100; on the
#: A100, whose file already holds FA2's efficiency, it counts twice — kept because the
#: A100 llm-foundry sweep ran at that rate (docs/estimate.md, "Why non-NVIDIA stacks run
#: slower on H100", open)
ATTENTION = {"cudnn": (1.0, 1.0), "fa2": (329.5 / 631.3, 318 / 518)}
#: flash_attn's fused cross-entropy (llm-foundry `loss_fn: fused_crossentropy`) per logit:
#: forward reads the BF16 logits once (the FP32 softmax stays in registers, only the
#: per-row LSE is written); backward reads them again and writes the BF16 gradient
FUSED_LOSS_BYTES = (2, 4)
#: FSDP1's reduce-dtype path per gradient element of a layer's unsharded flat gradient:
#: `.to(reduce_dtype)` (read BF16, write FP32) then the in-place pre-divide by the
#: gradient pre-divide factor (read + write FP32), both on the post-backward stream
FSDP1_CAST_BYTES, FSDP1_PREDIVIDE_BYTES = 6, 8
#: llm-foundry's `flash_attn_fn` runs FlashAttention-2's varlen kernel on unpadded tokens
#: (flash_attn `bert_padding`): forward, q, k and v each gathered by `index_first_axis`
#: (read + write, 4 B / element, 3 kernels), the output scattered back by `pad_input`
#: (zeros + index_put: 6 B / element, 2 kernels); backward, the output gradient gathered
#: (4 B, 1 kernel), dq, dk, dv scattered into zeros (6 B) and concatenated by the Wqkv
#: split's backward (`cat`, 4 B): 10 B / q, k, v element in 7 kernels
UNPAD = {
    "qkv": (Eager(4, 3), Eager(10, 7)),
    "out": (Eager(6, 2), Eager(4, 1)),
}
#: Transformer Engine's fused cast-transpose of a BF16 weight: read BF16, write the FP8
#: copy and its FP8 transpose (`te.Linear` with `is_first_microbatch=None` re-casts on
#: every call, TE v0.10 `Linear.forward`)
WEIGHT_CAST_BYTES = 4
#: torchao dynamic FP8 cast of a BF16 tensor under compile: the amax reduction fused into
#: the producer, then one pass reading BF16 and writing FP8; a transpose copy of FP8
CAST_BYTES, TRANSPOSE_BYTES = 3, 2


@dataclass(frozen=True, slots=True)
class Profile:
    """Kernel-level switches of one framework (see module doc)."""

    name: str
    eager: bool = False
    attention: str = "cudnn"
    fsdp2: bool = False
    repeat_kv: bool = False
    async_tp: bool = False
    tp_backward_overlap: bool = True
    selective_op: bool = False
    fp8_dynamic: bool = False
    shared_casts: bool = True
    eager_loss: bool = False
    fused_loss: bool = False
    fsdp1_fp32_reduce: bool = False
    unfused_casts: bool = False
    unpad: bool = False
    bias_sum: bool = False
    torch_cp: bool = False
    #: the vocabulary is padded to a multiple of this x TP (1: split as it is): Megatron's
    #: `make_vocab_size_divisible_by`, default 128 (NVIDIA/Megatron-LM
    #: megatron/training/tokenizer/tokenizer.py `_vocab_size_with_padding` @ 00ee966; the
    #: Megatron-Bridge performance recipes set `should_pad_vocab = True`); torchtitan and
    #: Hugging Face model classes build `nn.Embedding(vocab_size)` unpadded
    vocab_multiple: int = 1
    #: the eager RoPE chain (a key of `EAGER`): torchtitan's complex multiply or Hugging
    #: Face's `rotate_half` form
    rope_chain: str = "rope"
    #: how the layers fall on pipeline stages when no split is stated: Megatron-Core's
    #: even split (`megatron`) or torchtitan's `generate_split_points` (`torchtitan`,
    #: `pipesplit.torchtitan_split`)
    pp_split: str = "megatron"

    def attention_scale(self, backward: bool) -> float:
        """Efficiency of the framework's attention kernel relative to the hardware file's."""
        return ATTENTION[self.attention][1 if backward else 0]


_TITAN = Profile(
    "torchtitan",
    eager=True,
    attention="fa2",
    fsdp2=True,
    repeat_kv=True,
    async_tp=True,
    tp_backward_overlap=False,
    selective_op=True,
    fp8_dynamic=True,
    shared_casts=False,
    eager_loss=True,
    torch_cp=True,
    pp_split="torchtitan",
)
# torch.compile wraps each block; the loss stays eager
_TITAN_COMPILE = replace(_TITAN, name="torchtitan-compile", eager=False, shared_casts=True)
PROFILES = {
    "megatron": Profile("megatron", vocab_multiple=128),
    "torchtitan": _TITAN,
    "torchtitan-compile": _TITAN_COMPILE,
    # OLMo-core: torchtitan-compile's blocks with flash_attn's fused cross-entropy
    "olmo-core": replace(_TITAN_COMPILE, name="olmo-core", eager_loss=False, fused_loss=True),
    "hf-eager": Profile(
        "hf-eager",
        eager=True,
        attention="fa2",
        tp_backward_overlap=False,
        eager_loss=True,
        rope_chain="rope_rotate_half",
    ),
    # NeMo AutoModel's MoE models on their Transformer Engine backend under FSDP2
    "automodel": Profile("automodel", fsdp2=True, tp_backward_overlap=False),
    "llm-foundry": Profile(
        "llm-foundry",
        attention="fa2",
        fused_loss=True,
        fsdp1_fp32_reduce=True,
        unfused_casts=True,
        unpad=True,
        bias_sum=True,
    ),
}


@lru_cache(maxsize=64)
def profile(name: str, attention: str = "") -> Profile:
    """The profile called `name`, with `attention` (a key of `ATTENTION`) as its attention
    kernel where one is given (a plan's `attention_kernel`: Transformer Engine's backend as
    a recipe selects it). Cached: the generator asks for it at every op. Raises ConfigError
    for an unknown framework."""
    try:
        fw = PROFILES[name]
    except KeyError:
        raise ConfigError(
            f"plan: framework must be one of {', '.join(PROFILES)}, got {name!r}"
        ) from None
    return replace(fw, attention=attention) if attention and attention != fw.attention else fw
