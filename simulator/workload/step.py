"""`estimate()`: model + plan + hardware → generated per-rank graphs → simulated step.

The trace-free estimate: generate the distinct ranks' graphs (`generate`), price every
collective and send/recv with the system's network model (NCCL-like pricer over the real
process-group placement), simulate them with the event-driven simulator (overlap,
pipeline bubbles, network tiers as they fall), and report the step time, throughput,
MFU, memory per GPU and where the time goes. `EstimateResult.to_json()` is what
`lumos estimate --json` prints; its keys are stable.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos.errors import ConfigError, OutputError, SimulationError
from lumos.hwconfigs.kernel_tables import KernelPhysics
from lumos.hwconfigs.load import load_system
from lumos.hwconfigs.schema import SystemSpec
from lumos.limits import MAX_ET_NODES, MAX_NODES
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.costmodel.stragglers import slowest_gpu
from lumos.simulator.workload import fsdp_moe
from lumos.simulator.workload.autorecompute import AutoRecompute, choose_recompute
from lumos.simulator.workload.breakdown import Breakdown
from lumos.simulator.workload.generate import GeneratedStep, Generator
from lumos.simulator.workload.hybrid import HYBRID_ASSUMPTION
from lumos.simulator.workload.hybrid_spec import hybrid_flops_per_sequence
from lumos.simulator.workload.memory import MemoryEstimate, estimate_memory
from lumos.simulator.workload.periodic import periodic_timing, sample_counts, simulate_step
from lumos.simulator.workload.pipesplit import lenient_note, uneven
from lumos.simulator.workload.plan import ParallelPlan, Precision, Recompute
from lumos.simulator.workload.schedule import in_flight, stage_order
from lumos.simulator.workload.spec import ModelSpec, load_model

ASSUMPTIONS = (
    "Megatron-LM/NeMo-style training step: rank order TP (inside a node), CP, DP, PP "
    "(Megatron-Core's tp-cp-ep-dp-pp)",
    "linear layers in FP8 under fp8 (delayed scaling, per-GEMM input casts, the FP8 "
    "transposes Hopper's weight-gradient GEMMs read); embedding, "
    "output layer, attention, norms, element-wise ops and all communication in BF16",
    "gradients reduced in BF16 in buckets of max(40M, 1M x DP) parameters; "
    "Adam optimizer step memory-bound at 32 bytes per local parameter",
    "flash attention unless flash_attention is off; TP backward always overlaps the input "
    "re-gather with dgrad and the dgrad reduction with wgrad",
    "no CPU launch overhead, no data loading; kernels at the hwconfigs/kernels efficiencies, "
    "collectives from the system's NCCL-like network model",
)


@dataclass(slots=True)
class EstimateResult:
    """One estimated training step (seconds, GB = 1e9 bytes)."""

    model: str
    hardware: str
    plan: ParallelPlan
    gpus: int
    iteration_time_s: float
    tokens_per_s_per_gpu: float
    mfu: float
    model_tflops_per_gpu: float
    memory: MemoryEstimate
    breakdown: Breakdown
    per_rank_s: dict[int, float]
    assumptions: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    #: what `recompute="auto"` chose and the memory of each level it tried (else None)
    recompute_auto: AutoRecompute | None = None

    @property
    def fits(self) -> bool:
        return self.memory.fits

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON types (stable keys)."""
        return {
            "model": self.model,
            "hardware": self.hardware,
            "gpus": self.gpus,
            "plan": self.plan.to_dict(),
            "iteration_time_s": round(self.iteration_time_s, 6),
            "tokens_per_s_per_gpu": round(self.tokens_per_s_per_gpu, 3),
            "mfu": round(self.mfu, 5),
            "model_tflops_per_gpu": round(self.model_tflops_per_gpu, 3),
            "memory_gb_per_gpu": round(self.memory.total_gb, 3),
            "fits_in_memory": self.fits,
            "recompute_auto": self.recompute_auto.to_json() if self.recompute_auto else None,
            "memory": self.memory.to_json(),
            "breakdown": self.breakdown.to_json(),
            "per_rank_s": {str(k): round(v, 6) for k, v in sorted(self.per_rank_s.items())},
            "assumptions": self.assumptions,
            "stats": self.stats,
        }


def model_flops_per_step(model: ModelSpec, plan: ParallelPlan) -> float:
    """Model FLOPs of one step: 6 x parameters x tokens + non-causal attention
    (12 x layers x heads x head_dim x seq per token; MLA: the mean of its QK and V head
    widths), no recomputation — the usual MFU numerator. A sliding-window layer attends to
    min(seq, window) keys, not seq: counting seq let a 4096-key window at seq 131072 claim
    32x the attention it does (MFU 1.42). A mixture of experts counts its
    active parameters (router, top_k routed experts, shared experts), as Megatron-Bridge's
    and DeepSeek's MFU figures do; with multi-token prediction its layers and output heads
    too (Megatron-LM counts them). LoRA: no weight gradient of a frozen weight
    (`lora.model_flops`: 4 x frozen + 6 x adapter parameters). A hybrid Mamba-2 model
    counts as NVIDIA does for Nemotron-H (`hybrid_spec.hybrid_flops_per_sequence`)."""
    if model.pattern:
        return plan.gbs * hybrid_flops_per_sequence(model, plan.seq)
    tokens = plan.gbs * plan.seq
    width = model.attention_width  # heads x head_dim; MLA: the mean of its QK and V widths
    params = model.params(active=True) + model.mtp_params(active=True)
    windowed = sum(model.is_window_layer(i) for i in range(model.layers))
    keys = (model.layers + model.mtp_layers - windowed) * plan.seq
    keys += windowed * min(plan.seq, model.window)
    if plan.lora_rank:
        from lumos.simulator.workload.lora import model_flops

        return model_flops(model, plan, tokens, 12.0 * width * keys)
    return tokens * (6.0 * params + 12.0 * width * keys)


def _resolve(
    model: str | Path | ModelSpec, hw: str | Path | SystemSpec, gpus: int | None, world: int
) -> tuple[ModelSpec, SystemSpec]:
    spec = model if isinstance(model, ModelSpec) else load_model(model)
    system = hw if isinstance(hw, SystemSpec) else load_system(str(hw))
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int)):
        raise ConfigError(f"--gpus must be an integer, got {gpus!r}")
    if gpus is not None and gpus != world:
        raise ConfigError(
            f"--gpus is {gpus} but the plan runs on tp x pp x dp x cp = {world} GPUs: give "
            "the degrees that multiply to it (e.g. --dp), or leave --gpus out"
        )
    nodes = -(-world // system.gpus_per_node)
    from dataclasses import replace

    return spec, replace(system, num_nodes=max(nodes, 1))


def generate(
    model: str | Path | ModelSpec,
    plan: ParallelPlan,
    hw: str | Path | SystemSpec = "h100",
    physics: KernelPhysics | None = None,
) -> GeneratedStep:
    """The distinct ranks' graphs of one step (durations priced on `hw`'s GPU).

    Raises ConfigError for a plan the model cannot take or unknown model/hardware.
    """
    spec, system = _resolve(model, hw, None, plan.world)
    _, km = _job_kernels(system, physics, plan.world)
    plan, _ = _resolved_recompute(spec, plan, km)
    return Generator(spec, plan, km).step()


def estimate(
    model: str | Path | ModelSpec,
    plan: ParallelPlan,
    hw: str | Path | SystemSpec = "h100",
    *,
    gpus: int | None = None,
    physics: KernelPhysics | None = None,
    et_dir: str | Path | None = None,
    force: bool = False,
    exact: bool = False,
    all_ranks: bool = False,
) -> EstimateResult:
    """Estimate one training step of `model` under `plan` on system `hw`.

    `gpus`: cluster size (must be the plan's world size, its default); `physics`: kernel parameters
    instead of the shipped `hwconfigs/kernels/<gpu>.yaml`; `et_dir`: also write the
    distinct ranks' Chakra ETs there (every rank with `all_ranks`; replacing an earlier
    estimate's only with `force`, checked before any work: LumosError). A pipeline with
    many micro-batches is simulated with a few rounds of `pp` micro-batches and its steady
    state extrapolated (`periodic`, within 1 % of the full simulation); `exact` (or
    `et_dir`) simulates every micro-batch. A plan with `recompute="auto"` is estimated at the
    least recomputation whose memory fits (`autorecompute`; `recompute_auto` says which). Raises ConfigError for a plan the model, batch or hardware cannot take
    (FP8 on a GPU without it, `gpus` other than the plan's), SimulationError for a time past
    64-bit nanoseconds.
    """
    t0 = time.perf_counter()
    if et_dir is not None:
        from lumos.converters.chakra.set_output import check_set_output

        if not str(et_dir).strip():  # Path("") is ".": the ETs would land in the cwd
            raise OutputError("the ETs' folder is an empty path; give a folder")
        from lumos.simulator.workload.etwrite import PREFIX

        check_set_output(Path(et_dir), PREFIX, force=force, prefix_option=False)
    spec, system = _resolve(model, hw, gpus, plan.world)
    if plan.precision is Precision.FP8 and not system.gpu.peak_fp8_tflops:
        raise ConfigError(f"{system.gpu.name} has no FP8 tensor cores; use --precision bf16")
    mean, km = _job_kernels(system, physics, plan.world)
    plan, auto = _resolved_recompute(spec, plan, km)
    gen = Generator(spec, plan, km)
    try:
        if exact or et_dir is not None or sample_counts(plan) is None:
            nodes = MAX_NODES.check(
                whole_step_nodes(gen), "plan: nodes of the step simulated whole"
            )
            if et_dir is not None and all_ranks:  # every rank a copy of its distinct one
                copies = plan.world // (plan.pp * plan.cp)
                MAX_ET_NODES.check(nodes * copies, f"plan: nodes of all {plan.world} ranks' ETs")
            timing, step = simulate_step(gen, system)
            if et_dir is not None:
                from lumos.simulator.workload.etwrite import write_ets

                write_ets(step, spec, plan, et_dir, force=force, all_ranks=all_ranks)
        else:
            timing = periodic_timing(spec, plan, km, system)
    except OverflowError:  # a time past int64 ns: rates of 1e-300, latencies of 1e300
        raise SimulationError(
            "a simulated time of the step exceeds 64-bit nanoseconds (292 years): check the "
            f"plan's sizes and the rates of {system.source or system.name} (peaks, "
            "bandwidths, latencies)"
        ) from None
    iteration = timing.iteration_ns / 1e9
    flops = model_flops_per_step(spec, plan)
    peak = system.gpu.peak_fp8_tflops if plan.precision is Precision.FP8 else None
    peak = peak or system.gpu.peak_bf16_tflops
    achieved = flops / iteration / plan.world / 1e12
    memory = plan_memory(gen)
    return EstimateResult(
        model=spec.name,
        hardware=system.name,
        plan=plan,
        gpus=plan.world,
        iteration_time_s=iteration,
        tokens_per_s_per_gpu=plan.gbs * plan.seq / iteration / plan.world,
        mfu=achieved / peak,
        model_tflops_per_gpu=achieved,
        memory=memory,
        breakdown=timing.breakdown,
        per_rank_s={r: t / 1e9 for r, t in timing.per_rank_ns.items()},
        assumptions=[
            *ASSUMPTIONS,
            _straggler_assumption(mean, km.physics, plan.world),
            *_zero3_assumption(plan),
            *_lora_assumption(spec, plan),
            *gen.ctx.vocab_notes(),
            *([MOE_ASSUMPTION, MOE_ACCURACY] if spec.moe else []),
            *fsdp_moe.notes(spec.moe, plan.zero),
            *([HYBRID_ASSUMPTION] if spec.pattern else []),
            *filter(None, [lenient_note(plan, spec.layers)]),
        ],
        stats={**timing.stats, "wall_s": round(time.perf_counter() - t0, 3)},
        recompute_auto=auto,
    )


MOE_ASSUMPTION = (
    "mixture of experts as Megatron-Core: all-to-all token dispatcher on the EP group, "
    "the busiest EP rank's load (forced load balancing's, or the plan's moe_load_factor; "
    "every expert at its capacity under moe_token_drop), dropless routing's token counts "
    "gathered and waited for by the host before each MoE layer's dispatch, the host "
    "issuing each MoE layer (Megatron-Core's ops and TE modules at measured CPU times; "
    "grouped_gemm='te' only), grouped expert GEMMs (Transformer Engine's per-expert cuBLASLt loop, "
    "never faster than its host issues it, unless grouped_gemm='fused'; 'sequential': "
    "SequentialMLP's per-expert GEMMs and output copies), BF16 dispatch; "
    "all-to-alls overlapped with the "
    "other micro-batch's compute only with a2a_overlap"
)


#: what the published mixture-of-experts runs say of these estimates (docs/estimate.md)
MOE_ACCURACY = (
    "accuracy: mixture-of-experts estimates are rough: against 22 published H100 MoE runs "
    "(Megatron-Bridge, Megatron-Core model zoo, NeMo AutoModel) lumos is -54 % ... +25 % "
    "(-33 % ... +25 % without the two Qwen3 30B runs of Megatron-Bridge 25.11 / 26.02, "
    "releases NVIDIA reports 2x slow for that model: its issue #1998; mean |error| 14-33 % "
    "by set; dense models: 4-7 %), mostly too fast: docs/estimate.md"
)


def _job_kernels(
    system: SystemSpec, physics: KernelPhysics | None, gpus: int
) -> tuple[KernelPhysics, KernelModel]:
    """The kernel physics of `system`'s GPU (or `physics`) as its file describes them, and
    the kernel model at the clock of the slowest of the job's `gpus` GPUs (`stragglers`)."""
    file = KernelModel.for_gpu(system.gpu, physics)
    return file.physics, KernelModel(file.gpu, slowest_gpu(file.physics, gpus))


def _resolved_recompute(
    model: ModelSpec, plan: ParallelPlan, km: KernelModel
) -> tuple[ParallelPlan, AutoRecompute | None]:
    """`plan` with `recompute="auto"` resolved to the least level that fits (memory only)
    and what was tried; any other plan as it is, with None."""
    if plan.recompute is not Recompute.AUTO:
        return plan, None
    return choose_recompute(model, plan, km)


def _straggler_assumption(given: KernelPhysics, job: KernelPhysics, gpus: int) -> str:
    """What the slowest GPU did to the tensor clock: `job`'s over `given`'s (the file's
    `sustained_clock_fraction`, which describes `clock_reference_gpus` GPUs)."""
    factor = job.sustained_clock_fraction / given.sustained_clock_fraction
    return (
        f"the step runs at its slowest GPU's pace: tensor throughput x{factor:.3f} of the "
        f"clock of {given.clock_reference_gpus:,} GPU(s) the kernel file describes (expected "
        f"slowest of {gpus:,} with a {given.clock_spread:.1%} spread of sustained clocks "
        "across GPUs, hwconfigs/kernels clock_spread)"
    )


def _lora_assumption(model: ModelSpec, plan: ParallelPlan) -> list[str]:
    """What a LoRA plan prices (`lora`), naming its rank, targets and trained weights."""
    if not plan.lora_rank:
        return []
    from lumos.simulator.workload import lora

    chosen = ",".join(lora.targets(plan.lora_targets))
    n = lora.model_params(model, plan.lora_rank, plan.lora_targets)
    fsdp = (
        "; under FSDP the frozen weights are still all-gathered, only the adapters' "
        "gradients reduce-scattered"
        if plan.zero == 3
        else ""
    )
    return [
        f"LoRA fine-tuning: rank {plan.lora_rank} adapters "
        f"on {chosen} ({n / 1e6:.1f}M trained weights, BF16 GEMMs), base weights frozen (no "
        "weight-gradient GEMMs, gradient reduction or optimizer step for them; data "
        "gradients kept); MFU counts 4 x frozen + 6 x adapter parameters a token"
        + (", adapter outputs exchanged by all-to-all (lora_a2a)" if plan.lora_a2a else "")
        + fsdp
    ]


def _zero3_assumption(plan: ParallelPlan) -> list[str]:
    if plan.zero == 2:
        return [
            "ZeRO-2 as DeepSpeed stage 2: the distributed optimizer's collectives (gradients "
            "reduce-scattered in buckets during the backward, parameters all-gathered after "
            "the step; overlapped with the next forward unless overlap_param_gather is off, "
            "as DeepSpeed runs it), gradients and optimizer states sharded in memory"
        ]
    if plan.zero != 3:
        return []
    if plan.fsdp_under_pp:
        return [
            "ZeRO-3 as FSDP2 under PyTorch's pipelining: parameters gathered at a stage's "
            "first forward and kept (reshard_after_forward False), each micro-batch's "
            "gradients added into FP32 unsharded ones, reduce-scattered in FP32 after the "
            "stage's last backward (ZeRO-1's traffic)"
        ]
    if plan.fsdp_unit == "tensor":
        return [
            "ZeRO-3 as DeepSpeed 2021: each weight tensor >= 1e5 elements gathered alone, "
            "blocking; every gradient reduce-scattered alone; per-peer host views and copies; "
            "re-fetched for the backward past 1e9 elements of reuse distance"
        ]
    return ["ZeRO-3 as FSDP: one flat all-gather per layer, prefetched one layer ahead"]


def whole_step_nodes(gen: Generator) -> int:
    """Nodes of the distinct ranks' graphs of `gen`'s whole step, from one block per chunk
    and direction (cached for the generation itself): micro-batches x blocks, before any
    rank graph is built. Collectives and transfers between blocks are left out."""
    plan = gen.plan
    per_microbatch = sum(
        len(gen.block(stage, chunk, forward))
        for stage in range(plan.pp)
        for chunk in range(plan.vp)
        for forward in (True, False)
    )
    return plan.microbatches * plan.cp * per_microbatch


def plan_memory(gen: Generator) -> MemoryEstimate:
    """Memory per GPU of the busiest stage of `gen`'s plan, from the schedule alone.

    Each stage's in-flight activations come from its pipeline order (the order the
    generator builds the stage's graph with), so this needs no generated graph and costs
    milliseconds: the sweep sizes every plan with it before deciding to simulate.
    """
    plan = gen.plan
    params, alive, experts, trained = [], [], [], []
    for stage in range(plan.pp):
        vs = [gen.vstage(stage, c) for c in range(plan.vp)]
        params.append(sum(sum(gen.chunk_params(v)) for v in vs))
        trained.append(sum(sum(gen.trained_params(v)) for v in vs))
        experts.append(sum(sum(gen.expert_params(v)) for v in vs))
        per_chunk = [float(gen.chunk_layers[v]) for v in vs]
        if stage == plan.pp - 1:  # the multi-token-prediction layers sit in the last chunk
            per_chunk[-1] += gen.model.mtp_layers
        order = stage_order(plan.pp, plan.vp, plan.microbatches, stage)
        if uneven(plan):  # chunks of a stage differ: each pass keeps its own chunk's layers
            alive.append(in_flight(order, per_chunk))
        else:  # the mean chunk (kept as it was for the even split's figures)
            alive.append(in_flight(order) * sum(per_chunk) / len(vs))
    workspace = gen.ctx.km.physics.workspace_gb
    lora = trained if plan.lora_rank else None
    return estimate_memory(gen.ctx, params, alive, workspace, experts, lora)
