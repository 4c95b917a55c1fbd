"""`lumos estimate`: a training step's time, MFU and memory from a model and a plan, no trace."""

from __future__ import annotations

import shlex

import click

from lumos.cli.estimate_text import print_result
from lumos.cli.main import echo_json, handle_errors
from lumos.cli.options import (
    GLOBAL_BATCH,
    BadOption,
    Bounded,
    FiniteFloatRange,
    force_option,
    framework_option,
    hw_option,
)
from lumos.cli.outputs import no_stdout
from lumos.limits import MAX_LAYERS, MAX_RANKS, MAX_WIDTH
from lumos.outputs import printable

#: every integer flag has an upper bound, the resource limit its value feeds (a usage
#: error naming the flag, exit 2): degrees by the world size, stage layers by the layers,
#: batch and model dimensions by the width; the global batch by the micro-batches a step
#: takes times the default world size (`options.GLOBAL_BATCH`)
RANKS = Bounded(1, MAX_RANKS)
LAYERS = Bounded(1, MAX_LAYERS)
WIDTH = Bounded(1, MAX_WIDTH)


@click.command("estimate")
@click.option(
    "--model",
    required=True,
    help="Built-in model name, a model-spec YAML, or a model's config.json (Hugging Face or "
    "Megatron names; docs/estimate.md).",
)
@click.option("--tp", type=RANKS, default=1, help="Tensor-parallel size.")
@click.option("--pp", type=RANKS, default=1, help="Pipeline-parallel size.")
@click.option("--dp", type=RANKS, default=1, help="Data-parallel size.")
@click.option("--cp", type=RANKS, default=1, help="Context-parallel size.")
@click.option("--vp", type=LAYERS, default=1, help="Virtual stages per pipeline stage.")
@click.option(
    "--ep",
    type=RANKS,
    default=1,
    help="Expert-parallel size (mixture-of-experts models; carved out of tp x cp x dp).",
)
@click.option(
    "--etp",
    type=Bounded(0, MAX_RANKS),
    default=0,
    help="Expert tensor-parallel size: 1, or tp (0: tp, Megatron-Core's default).",
)
@click.option(
    "--first-stage-layers",
    type=Bounded(0, MAX_LAYERS),
    default=None,
    help="Decoder layers on the first pipeline stage, the rest spread evenly (Megatron-Core's "
    "--decoder-first-pipeline-num-layers).",
)
@click.option(
    "--last-stage-layers",
    type=Bounded(0, MAX_LAYERS),
    default=None,
    help="Decoder layers on the last pipeline stage (--decoder-last-pipeline-num-layers).",
)
@click.option(
    "--embedding-in-split",
    is_flag=True,
    help="Count the embedding as a layer of the first stage "
    "(--account-for-embedding-in-pipeline-split).",
)
@click.option(
    "--loss-in-split",
    is_flag=True,
    help="Count the loss head as a layer of the last stage (--account-for-loss-in-pipeline-split).",
)
@click.option(
    "--pp-layout",
    default="",
    help="Every model chunk's contents (--pipeline-model-parallel-layout), e.g. "
    "'Et|(tt|)*30mL': E embedding, t decoder layer, m MTP layer, L loss, | chunk boundary.",
)
@click.option("--mbs", type=WIDTH, default=1, help="Micro-batch size (sequences).")
@click.option(
    "--gbs",
    type=GLOBAL_BATCH,
    default=None,
    help="Global batch in sequences [mbs x dp].",
)
@click.option(
    "--seq",
    type=WIDTH,
    default=None,
    help="Sequence length [the model's; a config.json's seq_length, else 2048].",
)
@click.option(
    "--zero",
    type=click.Choice(["0", "1", "2", "3"]),
    default="1",
    help="ZeRO stage: 0 all-reduce, 1 distributed optimizer, 2 gradients sharded too "
    "(DeepSpeed stage 2), 3 FSDP (with --pp: FSDP2 in a pipeline, torchtitan / OLMo-core "
    "profiles).",
)
@click.option("--precision", type=click.Choice(["bf16", "fp8"]), default="bf16")
@click.option(
    "--recompute",
    type=click.Choice(["none", "selective", "full", "auto"]),
    default="none",
    help="Activation recomputation; auto: the least of none, selective, full whose memory "
    "fits the GPU (lumos' own memory accounting, no simulation), full if none does.",
)
@click.option(
    "--recompute-modules",
    default="",
    help="With --recompute selective (or auto's selective level): what Megatron-Core "
    "re-runs, comma-separated (core_attn, layernorm, mlp, moe_act, mla_up_proj; lumos' "
    "attn_out: attention output and MLP input not kept, memory only) [core_attn].",
)
@click.option("--no-sp", is_flag=True, help="No sequence parallelism (TP all-reduces).")
@click.option("--tp-overlap", is_flag=True, help="Overlap TP communication with the GEMMs.")
@click.option(
    "--vocab-multiple",
    type=Bounded(0, MAX_WIDTH),
    default=0,
    help="Pad the vocabulary to a multiple of this x tp (Megatron's "
    "--make-vocab-size-divisible-by) [0: the framework's: 128 on megatron, 1 (none) on the "
    "PyTorch-native ones].",
)
@click.option(
    "--packed-doc-len",
    type=Bounded(0, MAX_WIDTH),
    default=0,
    help="Sequence packing (SFT): documents of this length-weighted mean length "
    "(E[l^2]/E[l], tokens) concatenated into each sequence, attention within each [0: "
    "unpacked].",
)
@click.option(
    "--lora-rank",
    type=Bounded(0, MAX_WIDTH),
    default=0,
    help="LoRA fine-tuning: adapters of this rank on frozen base weights (no weight "
    "gradients, gradient reduction or optimizer step for the base) [0: full-parameter].",
)
@click.option(
    "--lora-targets",
    default="",
    help="With --lora-rank: the adapted linears, comma-separated from qkv, proj, fc1, fc2 "
    "(Megatron-Core's linear_qkv, linear_proj, linear_fc1, linear_fc2) [all four: "
    "Megatron-Bridge's and NeMo 2.0's default target_modules].",
)
@click.option(
    "--lora-a2a",
    is_flag=True,
    help="With --lora-rank and sequence parallelism: the proj / fc2 adapters' outputs "
    "exchanged by all-to-all, not all-gathered (NeMo a2a_experimental, MLPerf LORA_A2A=1).",
)
@click.option(
    "--fp8-param-gather",
    is_flag=True,
    help="With --precision fp8: FP8 linear weights, all-gathered in FP8 (Megatron-Core "
    "--fp8-param-gather, NeMo fp8_params).",
)
@click.option(
    "--dispatcher",
    type=click.Choice(["alltoall", "flex"]),
    default="alltoall",
    show_default=True,
    help="Mixture of experts: Megatron-Core's token dispatcher (flex: DeepEP / HybridEP).",
)
@click.option(
    "--moe-load-factor",
    type=FiniteFloatRange(min=0.0, max=100.0),
    default=0.0,
    help="Mixture of experts: the busiest EP rank's token load over the mean (>= 1; a "
    "trained router's, from a routing profile) [0: forced load balancing's, computed].",
)
@click.option(
    "--moe-token-drop",
    is_flag=True,
    help="Mixture of experts: drop-and-pad routing (capacity factor 1, padded: every "
    "expert gets its capacity, no device-to-host sync) instead of dropless.",
)
@click.option(
    "--grouped-gemm",
    type=click.Choice(["te", "fused", "sequential"]),
    default="te",
    show_default=True,
    help="Mixture of experts: expert GEMMs as Transformer Engine's per-expert loop (te), "
    "one grouped kernel (fused: CUTLASS gmm, torch._grouped_mm) or Megatron-Core's "
    "SequentialMLP (sequential: moe_grouped_gemm false).",
)
@click.option(
    "--a2a-overlap",
    is_flag=True,
    help="Mixture of experts: overlap the EP all-to-alls of one micro-batch with the other's "
    "compute (Megatron-Core's overlap_moe_expert_parallel_comm; needs --vp with --pp).",
)
@click.option("--no-grad-overlap", is_flag=True, help="Reduce gradients after the backward.")
@click.option("--no-param-overlap", is_flag=True, help="Gather parameters after the optimizer.")
@click.option("--no-flash", is_flag=True, help="Unfused attention (QK^T, softmax, AV).")
@click.option(
    "--fsdp-unit",
    type=click.Choice(["layer", "tensor"]),
    default="layer",
    help="ZeRO-3 fetch: one prefetched flat buffer per layer (FSDP), or each tensor "
    "alone, blocking (DeepSpeed 2021).",
)
@framework_option
@hw_option("System to estimate on.", default="h100")
@click.option(
    "--gpus",
    type=RANKS,
    default=None,
    help="Cluster size, checked against the plan: tp x pp x dp x cp [the plan's].",
)
@click.option(
    "-o",
    "--output",
    "et_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Write the distinct ranks' Chakra ETs into this folder.",
)
@force_option
@click.option(
    "--exact",
    is_flag=True,
    help="Simulate every micro-batch (default: a long pipeline is simulated for a few "
    "rounds and its steady state extrapolated, within 1 %).",
)
@click.option(
    "--all-ranks",
    is_flag=True,
    help="With -o: every rank's ET (a whole job, as `et validate` and ASTRA-sim take it).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def estimate_command(
    model: str,
    tp: int,
    pp: int,
    dp: int,
    cp: int,
    vp: int,
    ep: int,
    etp: int,
    first_stage_layers: int | None,
    last_stage_layers: int | None,
    embedding_in_split: bool,
    loss_in_split: bool,
    pp_layout: str,
    mbs: int,
    gbs: int | None,
    seq: int | None,
    zero: str,
    precision: str,
    recompute: str,
    recompute_modules: str,
    no_sp: bool,
    tp_overlap: bool,
    fp8_param_gather: bool,
    vocab_multiple: int,
    packed_doc_len: int,
    lora_rank: int,
    lora_targets: str,
    lora_a2a: bool,
    dispatcher: str,
    moe_load_factor: float,
    moe_token_drop: bool,
    grouped_gemm: str,
    a2a_overlap: bool,
    no_grad_overlap: bool,
    no_param_overlap: bool,
    no_flash: bool,
    fsdp_unit: str,
    framework: str,
    hw: str,
    gpus: int | None,
    et_dir: str | None,
    force: bool,
    exact: bool,
    all_ranks: bool,
    as_json: bool,
) -> None:
    """Estimate a training step from a model config, a parallel plan and hardware.

    Dense decoders and mixture-of-experts models (router, all-to-all token dispatch over
    --ep ranks, grouped expert GEMMs, shared experts; docs/estimate.md); full-parameter
    training or LoRA fine-tuning (--lora-rank)."""
    from lumos.simulator.workload.plan import ParallelPlan
    from lumos.simulator.workload.spec import load_model
    from lumos.simulator.workload.step import estimate

    spec = load_model(model)
    plan = ParallelPlan.build(
        spec,
        gbs=gbs,
        seq=seq,
        precision=precision,
        recompute=recompute,
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        vp=vp,
        ep=ep,
        etp=etp,
        first_stage_layers=first_stage_layers,
        last_stage_layers=last_stage_layers,
        embedding_in_split=embedding_in_split,
        loss_in_split=loss_in_split,
        pp_layout=pp_layout,
        mbs=mbs,
        zero=int(zero),
        recompute_modules=recompute_modules,
        sequence_parallel=not no_sp,
        tp_comm_overlap=tp_overlap,
        fp8_param_gather=fp8_param_gather,
        vocab_multiple=vocab_multiple,
        packed_doc_len=packed_doc_len,
        lora_rank=lora_rank,
        lora_targets=lora_targets,
        lora_a2a=lora_a2a,
        a2a_overlap=a2a_overlap,
        dispatcher=dispatcher,
        moe_load_factor=moe_load_factor,
        moe_token_drop=moe_token_drop,
        grouped_gemm=grouped_gemm,
        overlap_grad_reduce=not no_grad_overlap,
        overlap_param_gather=not no_param_overlap,
        flash_attention=not no_flash,
        fsdp_unit=fsdp_unit,
        framework=framework,
    )
    if et_dir is not None:
        no_stdout(et_dir, "the estimate's ETs")
        if not et_dir.strip():
            raise BadOption("an empty folder name; give a folder", param_hint="'-o'")
    result = estimate(
        spec, plan, hw, gpus=gpus, et_dir=et_dir, force=force, exact=exact, all_ranks=all_ranks
    )
    if as_json:
        echo_json(result.to_json())
        return
    print_result(result)
    if et_dir is not None and all_ranks:
        click.echo(f"  wrote all {plan.world} ranks' ETs to {printable(et_dir)}")
    elif et_dir is not None:
        n = result.stats["ranks_generated"]
        command = shlex.join(["lumos", "simulate", et_dir, "--hw", hw, "--allow-partial"])
        click.echo(
            f"  wrote {n} ETs (the distinct ranks of {plan.world}) to {printable(et_dir)}; "
            f"`{printable(command)}` replays them"
        )
