"""What a plan must satisfy to run a mixture-of-experts model (and what a dense model must
not set): Megatron-Core's own rules for expert parallelism (`ep` divides the experts,
`etp` x `ep` divides a stage's data-parallel ranks, sequence parallelism with TP), its
checks of the all-to-all overlap (`overlap_moe_expert_parallel_comm`,
`transformer_config.py`), and lumos's own limits (the megatron framework, or FSDP2 with
ZeRO-3 on the PyTorch stacks, `fsdp_moe`; the flex dispatcher with etp 1, the
dispatcher / grouped-GEMM / routing values it models).
Called by `ParallelPlan.check`."""

from __future__ import annotations

from typing import Any

from lumos.errors import ConfigError
from lumos.simulator.workload.framework import profile
from lumos.simulator.workload.spec import ModelSpec


def check_experts(plan: Any, model: ModelSpec) -> None:
    """Raise ConfigError naming the first expert setting `plan` (a `ParallelPlan`) or
    `model` cannot take."""
    if not model.moe:
        moe_only = plan.moe_load_factor or plan.moe_token_drop
        if plan.ep > 1 or plan.etp > 1 or plan.a2a_overlap or plan.dispatcher != "alltoall":
            raise ConfigError(f"plan: ep / etp need a mixture-of-experts model ({model.name})")
        if moe_only:
            raise ConfigError(
                f"plan: moe_load_factor / moe_token_drop need a mixture-of-experts model "
                f"({model.name})"
            )
        return
    if plan.ep < 1 or plan.etp not in (0, 1, plan.tp):
        raise ConfigError(
            f"plan: ep must be >= 1 and etp 1 or tp ({plan.tp}), got {plan.ep}, {plan.etp}"
        )
    if model.experts % plan.ep:
        raise ConfigError(f"plan: ep {plan.ep} must divide the {model.experts} experts")
    stage = plan.tp * plan.cp * plan.dp
    if stage % (plan.expert_tp * plan.ep):
        raise ConfigError(
            f"plan: etp x ep = {plan.expert_tp * plan.ep} must divide a stage's tp x cp x dp "
            f"= {stage} ranks (experts are sharded over ranks of the data-parallel group)"
        )
    if model.moe_ffn % plan.expert_tp or model.shared_ffn % plan.tp:
        raise ConfigError("plan: etp / tp must divide moe_ffn and shared_ffn")
    _check_fsdp2(plan)
    if plan.tp > 1 and not plan.sequence_parallel:
        raise ConfigError("plan: Megatron-Core needs sequence parallelism for MoE with tp > 1")
    _check_a2a_overlap(plan)
    if plan.dispatcher not in ("alltoall", "flex"):
        raise ConfigError(f"plan: dispatcher must be 'alltoall' or 'flex', got {plan.dispatcher!r}")
    if plan.grouped_gemm not in ("te", "fused", "sequential"):
        raise ConfigError(
            f"plan: grouped_gemm must be 'te', 'fused' or 'sequential', got {plan.grouped_gemm!r}"
        )
    if plan.dispatcher == "flex" and (plan.ep == 1 or plan.expert_tp > 1):
        raise ConfigError(
            "plan: the flex (DeepEP) dispatcher is modelled with ep > 1 and etp 1 only"
        )
    _check_routing(plan)


def _check_fsdp2(plan: Any) -> None:
    """Experts run on Megatron-Core (ZeRO 0-2) or on a PyTorch FSDP2 stack with `zero` 3
    (`fsdp_moe`): blocks and experts sharded per layer, experts as one grouped GEMM
    (torchtitan's `torch._grouped_mm`, AutoModel's `gmm`) or a per-expert loop, without
    Megatron-Core's all-to-all overlap."""
    fsdp2 = profile(plan.framework).fsdp2
    if plan.zero == 3 and not fsdp2:
        raise ConfigError(
            "plan: zero 3 (FSDP) with experts is modelled as PyTorch FSDP2 shards them "
            "(frameworks torchtitan, torchtitan-compile, olmo-core, automodel), not under "
            f"{plan.framework}"
        )
    if plan.framework == "megatron":
        return
    if plan.zero != 3 or plan.fsdp_unit != "layer":
        raise ConfigError(
            f"plan: experts under {plan.framework} are modelled with FSDP2 (zero 3, "
            "fsdp_unit 'layer'); other data parallelism with experts on the megatron "
            "framework only"
        )
    if plan.grouped_gemm == "te" or plan.a2a_overlap:
        raise ConfigError(
            f"plan: experts under {plan.framework} run as one grouped GEMM "
            "(grouped_gemm 'fused': torch._grouped_mm) or a per-expert loop ('sequential'), "
            "without a2a_overlap (Transformer Engine's per-expert GEMMs and Megatron-Core's "
            "all-to-all overlap are megatron's)"
        )


def _check_routing(plan: Any) -> None:
    """`moe_load_factor`: 0 (forced balancing's) or a load of at least the mean; token
    dropping runs on the all-to-all dispatcher only (Megatron-Core: "moe_expert_capacity_
    factor only works with alltoall token dispatcher") and pads every expert to its
    capacity, so no load factor goes with it."""
    factor = plan.moe_load_factor
    if not 0 <= factor < 100 or 0 < factor < 1:
        raise ConfigError(
            "plan: moe_load_factor is the busiest EP rank's load over the mean: 0 (forced "
            f"load balancing's, computed) or between 1 and 100, got {factor!r}"
        )
    if plan.moe_token_drop and (plan.dispatcher != "alltoall" or factor):
        raise ConfigError(
            "plan: moe_token_drop (drop-and-pad routing) is modelled on the alltoall "
            "dispatcher, without a moe_load_factor (every expert gets its capacity)"
        )


def _check_a2a_overlap(plan: Any) -> None:
    """Megatron-Core's own checks of `overlap_moe_expert_parallel_comm`
    (transformer_config.py): expert parallelism, no full recomputation, and the
    interleaved schedule when pipelined."""
    if not plan.a2a_overlap:
        return
    if plan.ep == 1:
        raise ConfigError("plan: a2a_overlap needs expert parallelism (ep > 1)")
    if plan.recompute.value == "full":
        raise ConfigError("plan: a2a_overlap needs recompute other than full (Megatron-Core)")
    if plan.pp > 1 and plan.vp == 1:
        raise ConfigError("plan: a2a_overlap with pp > 1 needs the interleaved schedule (vp)")
