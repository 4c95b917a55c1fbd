"""Parallel plans: how a training step is split over GPUs, and where each rank sits.

A `ParallelPlan` holds the degrees (TP, CP, PP with `vp` virtual stages, DP), the batch
(micro-batch `mbs`, global batch `gbs` in sequences, so `gbs / (mbs * dp)` micro-batches
per step), sequence length, ZeRO stage (0: plain DP all-reduce, 1: distributed optimizer
— reduce-scatter grads, all-gather params —, 2: the same collectives with the gradients
kept sharded too (DeepSpeed stage 2), 3: FSDP, weights gathered per layer),
precision, activation recomputation, the overlap flags and the `framework` whose kernels
run the layer (`framework`: megatron, torchtitan, torchtitan-compile, olmo-core, llm-foundry).
ZeRO-3 gathers one flat buffer per layer, prefetched (`fsdp_unit` "layer": PyTorch FSDP,
Megatron), or each weight tensor alone with a blocking fetch ("tensor": DeepSpeed's 2021 stage 3, see
`zero3_tensor`); under pipeline parallelism (FSDP2 stacks only) it keeps the stage's
parameters unsharded between micro-batches and runs ZeRO-1's traffic (`step_zero`,
`fsdp_pp`). Rank placement (`layout`) is Megatron-Core's default order `tp-cp-ep-dp-pp`:
TP fastest (inside a node), then CP, then DP, the stage outermost:
`rank = ((stage * dp + dp_i) * cp + cp_i) * tp + tp_i`.

Mixture of experts: `ep` experts-parallel ranks share one MoE layer's experts and
`etp` (1 or tp; Megatron-Core's default: tp) split each expert's FFN. As in Megatron-Core,
the expert groups are carved out of a stage's tp x cp x dp ranks: within a stage, rank
index `w = tp_i + tp * (cp_i + cp * dp_i) = etp_i + etp * (ep_i + ep * edp_i)`, so the EP
group is `ep` ranks `etp` apart and the expert-data-parallel group (which reduces the
expert gradients) the remaining `tp·cp·dp / (etp·ep)` (PP outermost, so an EP group of
tp·ep <= 8 ranks stays inside a node).
`a2a_overlap` is Megatron-Core's `overlap_moe_expert_parallel_comm` (Megatron-Bridge's
`moe_a2a_overlap`): each steady-state forward runs merged with the next backward, layer by
layer, so the all-to-alls of one overlap the other's compute (`moe_overlap`).
`dispatcher` is Megatron-Core's token dispatcher: `alltoall` (default) or `flex` (DeepEP /
HybridEP: each token sent once per destination rank, permuted there; `moe`).
`grouped_gemm` is how the experts' GEMMs run: `te` (default; Transformer Engine's
`GroupedLinear`, Megatron-Core's `TEGroupedMLP`: one cuBLASLt GEMM per local expert, issued
by the host in a loop) or `fused` (one grouped kernel for all local experts: grouped_gemm's
CUTLASS `gmm` or `torch._grouped_mm`, as NeMo AutoModel's `GroupedExpertsDeepEP` and
Megatron-Core's legacy `GroupedMLP` run them; `moe.grouped_gemm`) or `sequential`
(`moe_grouped_gemm` false: Megatron-Core 0.9's `SequentialMLP`, one MLP module per local
expert, its outputs copied into a zero-filled buffer; `moe._sequential_copies`).
`first_stage_layers`, `last_stage_layers`, `embedding_in_split`, `loss_in_split` and
`pp_layout` place decoder layers unevenly over the pipeline, as Megatron-Core's
`--decoder-first/last-pipeline-num-layers`, `--account-for-embedding/loss-in-pipeline-split`
and `--pipeline-model-parallel-layout` do (`pipesplit`).
`ub_config` names the Transformer Engine userbuffers config a recipe states for its TP-comm
overlap (`userbuffers.RECIPES`); empty: the one NeMo ships for the model's hidden size and TP.
`loss_fusion` is Megatron-Core's `cross_entropy_loss_fusion`; False runs its unfused
vocab-parallel cross-entropy (FP32 logits, six passes forward, two backward; `elementwise`).
`defer_embedding_wgrad` is Megatron-Core's `defer_embedding_wgrad_compute` with
`wgrad_deferral_limit`: the output layer's weight-gradient GEMMs of the first that many
micro-batches run at the pipeline flush, after the last stage's last backward (0: none).
`attention_kernel`: '' (the framework's), `cudnn` or `fa2` (`framework.ATTENTION`).
`fp8_param_gather` is Megatron-Core's `--fp8-param-gather` (NeMo `fp8_params`): FP8 linear
weights, all-gathered in FP8 (`fp8_params`). `packed_doc_len` (0: none) is sequence
packing (NeMo's `packed_sequence` for SFT): documents of that length-weighted mean length
concatenated into each sequence, attention within each (`attention.band`).
`lora_rank` (0: full-parameter training) trains LoRA adapters of that rank beside the
`lora_targets` linears (comma-separated `qkv,proj,fc1,fc2`; '': all four, Megatron-Bridge's
default) on frozen base weights; `lora_a2a` is NeMo's `a2a_experimental` (`lora`).
`moe_load_factor` is the busiest expert-parallel rank's token load over the mean (0: forced
load balancing's, computed: `moe_load`); `moe_token_drop` is Megatron-Core's drop-and-pad
routing (`moe_expert_capacity_factor` 1 with `moe_pad_expert_input_to_capacity`: every
expert gets its capacity of rows, no device-to-host sync; `moe_meta`). The expert checks
are `moe_checks`'. `vocab_multiple` is Megatron's `make_vocab_size_divisible_by`: the
vocabulary is padded to a multiple of it x TP (`dims.padded_vocab`); 0 takes the
framework's (128 under `megatron`, 1, no padding, under the PyTorch-native ones).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from lumos.errors import ConfigError
from lumos.limits import MAX_MICROBATCHES, MAX_RANKS, MAX_WIDTH
from lumos.simulator.workload import pipesplit
from lumos.simulator.workload.fieldtypes import check_recipe_fields, check_types, is_int, whole
from lumos.simulator.workload.framework import profile
from lumos.simulator.workload.moe_checks import check_experts
from lumos.simulator.workload.shape_checks import check_shape
from lumos.simulator.workload.spec import ModelSpec


class Recompute(str, Enum):
    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"
    #: a request, not a level: the least of none, selective, full whose memory fits
    #: (`autorecompute.choose_recompute`, which `estimate` runs before generating)
    AUTO = "auto"


class Precision(str, Enum):
    BF16 = "bf16"
    FP8 = "fp8"


#: the enum-typed plan fields' types, by annotation
ENUMS: dict[str, type[Enum]] = {"Precision": Precision, "Recompute": Recompute}

#: Megatron-Core `recompute_modules` lumos models (core_attn default; `mlp`: layer._mlp_recompute)
#: and lumos' `attn_out`: attention output and MLP input not kept (JAX save_qkv_proj; memory only)
RECOMPUTE_MODULES = frozenset(
    {"core_attn", "layernorm", "moe_act", "mla_up_proj", "mlp", "attn_out"}
)


@dataclass(frozen=True, slots=True)
class ParallelPlan:
    """Degrees, batch and framework options of one training step (see module doc)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    vp: int = 1
    mbs: int = 1
    gbs: int = 1
    seq: int = 2048
    zero: int = 1
    precision: Precision = Precision.BF16
    recompute: Recompute = Recompute.NONE
    sequence_parallel: bool = True
    tp_comm_overlap: bool = False
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    flash_attention: bool = True
    fsdp_unit: str = "layer"
    framework: str = "megatron"
    ep: int = 1
    etp: int = 0
    recompute_modules: str = ""
    a2a_overlap: bool = False
    dispatcher: str = "alltoall"
    grouped_gemm: str = "te"
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    embedding_in_split: bool = False
    loss_in_split: bool = False
    pp_layout: str = ""
    ub_config: str = ""
    loss_fusion: bool = True
    defer_embedding_wgrad: int = 0
    attention_kernel: str = ""
    fp8_param_gather: bool = False
    packed_doc_len: int = 0
    lora_rank: int = 0
    lora_targets: str = ""
    lora_a2a: bool = False
    moe_load_factor: float = 0.0
    moe_token_drop: bool = False
    vocab_multiple: int = 0

    @property
    def selective_modules(self) -> frozenset[str]:
        """What selective recomputation re-runs (Megatron-Core's `recompute_modules`,
        comma-separated; default its `core_attn`); empty unless recompute is selective
        (under auto: what its selective level would re-run)."""
        if self.recompute not in (Recompute.SELECTIVE, Recompute.AUTO):
            return frozenset()
        given = {m.strip() for m in self.recompute_modules.split(",") if m.strip()}
        return frozenset(given or {"core_attn"})

    @property
    def expert_tp(self) -> int:
        """Expert tensor parallelism (`etp`; 0 stands for Megatron-Core's default, tp)."""
        return self.etp or self.tp

    @property
    def expert_dp(self) -> int:
        """Ranks of one stage holding the same expert shard (reduce expert gradients)."""
        return self.tp * self.cp * self.dp // (self.expert_tp * self.ep)

    @property
    def fsdp_under_pp(self) -> bool:
        """FSDP2 in a pipeline (`zero` 3, `pp` > 1, something to shard over: dp x cp > 1;
        `fsdp_pp`): it runs ZeRO-1's traffic."""
        return self.zero == 3 and self.pp > 1 and self.dp * self.cp > 1

    @property
    def step_zero(self) -> int:
        """The ZeRO stage whose collectives the step runs: 1 for ZeRO-2 (gradients
        reduce-scattered, parameters all-gathered after the step, as the distributed
        optimizer does; only the memory differs) and for FSDP under a pipeline
        (parameters gathered once a step, gradients reduce-scattered after the last
        micro-batch: `fsdp_pp`), else `zero`."""
        return 1 if self.fsdp_under_pp or self.zero == 2 else self.zero

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def microbatches(self) -> int:
        return self.gbs // (self.mbs * self.dp)

    @classmethod
    def build(
        cls,
        model: ModelSpec,
        *,
        gbs: int | None = None,
        seq: int | None = None,
        precision: str | Precision = Precision.BF16,
        recompute: str | Recompute = Recompute.NONE,
        **options: Any,
    ) -> ParallelPlan:
        """A plan with the CLI's defaults: `gbs` one micro-batch per DP rank, `seq` the
        model's; `options` are the other fields. Raises ConfigError for an unknown field
        or value, or a plan `model` cannot take."""
        unknown = sorted(set(options) - set(cls.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"plan: unknown option {unknown[0]!r}")
        try:
            prec, rec = Precision(precision), Recompute(recompute)
        except ValueError as exc:
            raise ConfigError(f"plan: {exc}") from None
        options = {k: whole(v) for k, v in options.items()}
        mbs, dp = options.get("mbs", 1), options.get("dp", 1)
        per_step = mbs * dp if is_int(mbs) and is_int(dp) else 1  # else refused by `check`
        plan = cls(
            gbs=per_step if gbs is None else whole(gbs),
            seq=model.seq if seq is None else whole(seq),
            precision=prec,
            recompute=rec,
            **options,
        )
        plan.check(model)
        return plan

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["precision"] = self.precision.value
        out["recompute"] = self.recompute.value
        return out

    def check(self, model: ModelSpec) -> None:
        """Raise ConfigError naming the first setting the model or the batch cannot take."""
        check_types(self, ENUMS, "plan")  # the API passes anything: tp="8", tp=True
        for key in ("tp", "pp", "dp", "cp", "vp", "mbs", "gbs", "seq", "ep"):
            if getattr(self, key) < 1:
                raise ConfigError(f"plan: {key} must be >= 1, got {getattr(self, key)}")
        if self.etp < 0:
            raise ConfigError(f"plan: etp must be >= 0 (0: tp), got {self.etp}")
        if not 0 <= self.vocab_multiple <= model.vocab:  # past V: rows of padding alone
            raise ConfigError(
                f"plan: vocab_multiple must be 0 (the framework's) to the vocabulary "
                f"({model.vocab}), got {self.vocab_multiple}"
            )
        if self.zero not in (0, 1, 2, 3):
            raise ConfigError(f"plan: zero must be 0, 1, 2 or 3, got {self.zero}")
        MAX_RANKS.check(self.world, "plan: world size (tp x pp x dp x cp)")
        MAX_WIDTH.check(self.seq, "plan: seq")
        # a micro-batch's tokens are a batch dimension too: mbs 10^9 passed every bound
        # and left the 64-bit FLOP counts (exit 5, naming no setting)
        MAX_WIDTH.check(self.mbs * self.seq, "plan: tokens of one micro-batch (mbs x seq)")
        MAX_MICROBATCHES.check(self.microbatches, "plan: micro-batches per step (gbs / mbs / dp)")
        if self.gbs % (self.mbs * self.dp):
            raise ConfigError(
                f"plan: gbs {self.gbs} is not a multiple of mbs x dp = {self.mbs * self.dp}"
            )
        check_shape(self, model)
        self.chunk_layers(model)
        if self.vp > 1 and self.microbatches % self.pp:
            raise ConfigError(
                f"plan: the interleaved schedule needs micro-batches ({self.microbatches}) "
                f"to be a multiple of pp ({self.pp})"
            )
        if self.fsdp_unit not in ("layer", "tensor"):
            raise ConfigError(
                f"plan: fsdp_unit must be 'layer' or 'tensor', got {self.fsdp_unit!r}"
            )
        profile(self.framework)
        check_recipe_fields(self)
        self._check_modules()
        if self.zero == 3 and self.pp > 1 and not profile(self.framework).fsdp2:
            raise ConfigError(
                "plan: zero 3 (FSDP) with pipeline parallelism is modelled as FSDP2 runs it "
                "under PyTorch's pipelining (frameworks torchtitan, torchtitan-compile, "
                f"olmo-core), not under {self.framework}"
            )
        if self.fp8_param_gather and (
            self.precision is not Precision.FP8
            or self.framework != "megatron"
            or self.zero not in (0, 1)
        ):
            raise ConfigError(
                "plan: fp8_param_gather (FP8 parameters) is modelled for FP8 Transformer "
                "Engine linears on the megatron framework with zero 0 or 1"
            )
        if self.packed_doc_len < 0 or (
            self.packed_doc_len and (self.cp > 1 or not self.flash_attention)
        ):
            raise ConfigError(
                "plan: packed_doc_len must be >= 0 (0: unpacked) and is modelled with flash "
                "attention without context parallelism"
            )
        if self.packed_doc_len > self.seq:
            raise ConfigError(
                f"plan: packed_doc_len {self.packed_doc_len} is longer than seq {self.seq}: "
                "packed documents are at most one sequence long"
            )
        from lumos.simulator.workload.lora import check as check_lora

        check_lora(self, model)
        if self.fsdp_under_pp and self.fsdp_unit != "layer":
            raise ConfigError("plan: zero 3 with pipeline parallelism needs fsdp_unit 'layer'")
        check_experts(self, model)
        if model.mla and (not self.flash_attention or self.framework != "megatron"):
            raise ConfigError(
                "plan: multi-head latent attention is modelled with flash attention on the "
                "megatron framework only"
            )
        if model.mtp_layers and (self.zero == 3 or self.framework != "megatron"):
            raise ConfigError(
                "plan: multi-token prediction is modelled on the megatron framework without "
                "ZeRO-3 only"
            )
        if "mla_up_proj" in self.selective_modules and not model.mla:
            raise ConfigError(
                "plan: recompute module 'mla_up_proj' needs multi-head latent attention"
            )
        if "mlp" in self.selective_modules and self.zero == 3 and self.fsdp_unit == "tensor":
            raise ConfigError(
                "plan: recompute module 'mlp' under tensor-wise ZeRO-3 is not modelled"
            )
        if model.mla and self.zero == 3 and self.fsdp_unit == "tensor":
            raise ConfigError(
                "plan: multi-head latent attention under tensor-wise ZeRO-3 is not modelled"
            )

    def chunk_layers(self, model: ModelSpec) -> list[int]:
        """Decoder layers of every model chunk, virtual-stage order (`pipesplit`); raises
        ConfigError for a split that does not add up."""
        return pipesplit.chunk_layers(self, model.layers, model.mtp_layers)

    def _check_modules(self) -> None:
        if not self.recompute_modules:
            return
        if self.recompute not in (Recompute.SELECTIVE, Recompute.AUTO):
            raise ConfigError("plan: recompute_modules need selective (or auto) recompute")
        if self.framework != "megatron":
            raise ConfigError("plan: recompute_modules need selective recompute on megatron")
        unknown = sorted(self.selective_modules - RECOMPUTE_MODULES)
        if unknown:
            known = ", ".join(sorted(RECOMPUTE_MODULES))
            raise ConfigError(
                f"plan: recompute module {unknown[0]!r} is not modelled (modelled: {known})"
            )
