"""Per-rank tensor sizes of a model under a plan, and the kernel model that prices them.

`Ctx` is what every op builder needs: the model, the plan, local sizes on one TP/CP rank
(tokens per micro-batch `T`, sequence-parallel shard `T_sp`, local heads, KV heads, FFN
width, vocabulary shard: the padded vocabulary over TP, `padded_vocab`) and the
`KernelModel`. Linear layers of the transformer run in
FP8 under `precision fp8`; embedding, output layer, attention, norms and element-wise
ops stay BF16 (Transformer Engine's recipe).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload.framework import Profile, profile
from lumos.simulator.workload.plan import ParallelPlan, Precision
from lumos.simulator.workload.spec import ModelSpec

BF16 = 2


def padded_vocab(vocab: int, tp: int, multiple: int) -> int:
    """The vocabulary a model of `vocab` tokens builds under `tp`: padded up to a multiple
    of `multiple` x `tp` (Megatron's `_vocab_size_with_padding`; `multiple` 1 pads only
    to a whole number of rows a rank, as `ceil(vocab / tp)` a rank splits it)."""
    step = multiple * tp
    return -(-vocab // step) * step


def _multiple(plan: ParallelPlan) -> int:
    """The plan's vocabulary multiple: its own, else its framework's."""
    return plan.vocab_multiple or profile(plan.framework).vocab_multiple


@dataclass(frozen=True, slots=True)
class Ctx:
    """Local sizes of one rank and the kernel model (see module doc)."""

    model: ModelSpec
    plan: ParallelPlan
    km: KernelModel
    b: int
    s: int
    T: int
    T_sp: int
    h: int
    d: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int

    @classmethod
    def make(cls, model: ModelSpec, plan: ParallelPlan, km: KernelModel) -> Ctx:
        t = plan.tp
        s = plan.seq // plan.cp
        T = plan.mbs * s
        return cls(
            model,
            plan,
            km,
            plan.mbs,
            s,
            T,
            T // t if plan.sequence_parallel and t > 1 else T,
            model.hidden,
            model.head_dim,
            model.heads // t,
            max(1, math.ceil(model.kv_heads / t)),
            model.ffn // t,
            padded_vocab(model.vocab, t, _multiple(plan)) // t,
        )

    def vocab_notes(self) -> list[str]:
        """The assumption an estimate states when the vocabulary was padded (else none)."""
        padded, own, m = self.vocab * self.plan.tp, self.model.vocab, _multiple(self.plan)
        if m == 1 or padded == own:
            return []
        return [
            f"vocabulary padded {own:,} -> {padded:,} (a multiple of {m} x TP, Megatron's "
            "make_vocab_size_divisible_by): the embedding, output layer and loss price the "
            "padded rows; the parameter count is the model's own"
        ]

    @property
    def fw(self) -> Profile:
        """The plan's framework kernel profile (`framework`), with the plan's attention kernel
        where it names one (`attention_kernel`: Transformer Engine's backend as a recipe
        selects it, e.g. flash-attn 2 under `NVTE_FUSED_ATTN=0`)."""
        return profile(self.plan.framework, self.plan.attention_kernel)

    @property
    def linear_dtype(self) -> str:
        return "fp8" if self.plan.precision is Precision.FP8 else "bf16"

    @property
    def sp(self) -> bool:
        return self.plan.sequence_parallel and self.plan.tp > 1

    @property
    def act_bytes(self) -> int:
        """Bytes of one [T_sp, h] BF16 activation (what SP collectives and PP move)."""
        return self.T_sp * self.h * BF16

    @property
    def pp_bytes(self) -> int:
        """Bytes of one pipeline transfer: the activation, scattered over TP."""
        return self.T * self.h * BF16 // self.plan.tp

    @property
    def qkv_width(self) -> int:
        """Local width of the attention's q, k and v together (MLA: heads x (2 x the QK
        head width + the V head width))."""
        m = self.model
        if m.mla:
            return self.heads * (2 * m.qk_dim + m.v_dim)
        return (self.heads + 2 * self.kv_heads) * self.d

    @property
    def attn_out_width(self) -> int:
        """Local width of the attention output, the output projection's input."""
        return self.heads * self.model.v_dim

    @property
    def up_width(self) -> int:
        return self.ffn * (2 if self.model.gated else 1)

    def gemm(
        self,
        m: int,
        n: int,
        k: int,
        dtype: str | None = None,
        wgrad: bool = False,
        sms: int | None = None,
    ) -> tuple[float, float, float]:
        """(ns, FLOPs, bytes) of one GEMM; `dtype` defaults to the linear-layer dtype. A
        weight-gradient GEMM accumulates into the FP32 main gradient (Megatron's gradient
        accumulation fusion): its epilogue reads and writes 8 bytes per element. `sms`:
        the SMs it may use (all by default)."""
        dt = dtype or self.linear_dtype
        size = 1 if dt == "fp8" else 2
        out = 8 if wgrad else BF16
        return (
            self.km.gemm_ns(m, n, k, dt, out_bytes=out, sms=sms),
            2.0 * m * n * k,
            float((m * k + k * n) * size + m * n * out),
        )

    def mem(self, nbytes: float) -> tuple[float, float, float]:
        """(ns, 0, bytes) of a memory-bound kernel."""
        return (self.km.memory_ns(nbytes), 0.0, float(nbytes))

    def layer_params_local(self) -> int:
        """Weights of one layer held by one TP rank."""
        return self.local_params(self.model.layer_params())

    def local_params(self, params: int) -> int:
        """One TP rank's share of a layer's `params`: all split over TP but MLA's
        replicated down-projections (`ModelSpec.mla_replicated_params`)."""
        whole = self.model.mla_replicated_params()
        return (params - whole) // self.plan.tp + whole
