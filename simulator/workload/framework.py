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
  operands for the weight-gradient GEMM.
* ``torchtitan-compile``: the same with `torch.compile` per block — Inductor fuses each
  element-wise chain into one kernel (the fused byte counts) and AOTAutograd's CSE
  shares one FP8 cast between linears reading the same input.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
EAGER = {
    "rmsnorm": (Eager(36, 8), Eager(84, 14)),
    "rope": (Eager(20, 3), Eager(20, 3)),
    "swiglu": (Eager(10, 2), Eager(18, 3)),
    "cross_entropy": (Eager(14, 2), Eager(22, 3)),
}
#: Megatron-Core's unfused vocab-parallel cross-entropy (`cross_entropy_loss_fusion` off,
#: its default; megatron/core/tensor_parallel/cross_entropy.py) per logit: forward
#: `.float()` 6, max 4, in-place subtract of the max 8, exp 8, sum 4, divide 8; backward
#: the in-place multiply by the loss gradient 8 and the cast back to BF16 6
UNFUSED_CROSS_ENTROPY = (Eager(38, 6), Eager(14, 2))
#: SDPA's FlashAttention-2 over the hardware file's fused-attention (cuDNN / FA3-class)
#: efficiencies, forward and backward (sources in the module doc)
ATTENTION = {"cudnn": (1.0, 1.0), "fa2": (329.5 / 631.3, 318 / 518)}
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
)
PROFILES = {
    "megatron": Profile("megatron"),
    "torchtitan": _TITAN,
    # torch.compile wraps each block; the loss stays eager
    "torchtitan-compile": replace(
        _TITAN, name="torchtitan-compile", eager=False, shared_casts=True
    ),
}


def profile(name: str) -> Profile:
    """The profile called `name`. Raises ConfigError for an unknown framework."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(
            f"plan: framework must be one of {', '.join(PROFILES)}, got {name!r}"
        ) from None
