"""What `lumos estimate` prints: the header line naming the model, hardware and plan, and
the step's time, throughput, MFU, breakdown, memory and notes (the JSON form is the
result's own `to_json`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from lumos.outputs import printable

if TYPE_CHECKING:
    from lumos.simulator.workload.plan import ParallelPlan
    from lumos.simulator.workload.step import EstimateResult


def split_text(p: ParallelPlan) -> str:
    """The plan's uneven pipeline split, FP8 parameters, sequence packing, LoRA and stated
    MoE routing, as the header shows them ('' for none)."""
    parts = [f"layout {p.pp_layout}"] if p.pp_layout else []
    if p.first_stage_layers is not None or p.last_stage_layers is not None:
        first, last = p.first_stage_layers, p.last_stage_layers
        parts.append(
            f"first/last stage layers {first if first is not None else '-'}/"
            f"{last if last is not None else '-'}"
        )
    parts += ["embedding in split"] * p.embedding_in_split + ["loss in split"] * p.loss_in_split
    parts += ["FP8 parameters"] * p.fp8_param_gather
    parts += [f"packed documents of {p.packed_doc_len} tokens"] * bool(p.packed_doc_len)
    if p.lora_rank:
        from lumos.simulator.workload.lora import targets

        a2a = ", all-to-all" if p.lora_a2a else ""
        parts.append(f"LoRA rank {p.lora_rank} on {','.join(targets(p.lora_targets))}{a2a}")
    if p.vocab_multiple:
        parts.append(f"vocab multiple {p.vocab_multiple}")
    parts += [f"busiest EP rank's load x{p.moe_load_factor:g}"] * bool(p.moe_load_factor)
    parts += ["token drop (capacity 1, padded)"] * p.moe_token_drop
    return "".join(f", {x}" for x in parts)


def print_result(result: EstimateResult) -> None:
    p, b, m = result.plan, result.breakdown, result.memory
    vp = f"(vp{p.vp})" if p.vp > 1 else ""
    click.echo(
        f"{printable(result.model)} on {result.gpus} x {printable(result.hardware)}: TP{p.tp} PP{p.pp}{vp} DP{p.dp} "
        f"CP{p.cp}{f' EP{p.ep} ETP{p.expert_tp}' if p.ep > 1 else ''}, mbs {p.mbs}, "
        f"gbs {p.gbs}, seq {p.seq}, zero {p.zero}, "
        f"{p.precision.value}, recompute {p.recompute.value}"
        f"{f' ({result.recompute_auto.text()})' if result.recompute_auto else ''}"
        f"{'' if p.framework == 'megatron' else ', ' + p.framework}{split_text(p)}"
    )
    click.echo(f"  iteration time   {result.iteration_time_s:.3f} s")
    click.echo(f"  tokens/s/GPU     {result.tokens_per_s_per_gpu:.1f}")
    click.echo(
        f"  MFU              {100 * result.mfu:.1f} % "
        f"({result.model_tflops_per_gpu:.0f} model TFLOP/s per GPU)"
    )
    click.echo(
        f"  breakdown (rank {b.rank}): compute {b.compute_s:.3f} s, exposed TP "
        f"{b.exposed_tp_s:.3f}, CP {b.exposed_cp_s:.3f}, DP {b.exposed_dp_s:.3f}, "
        f"PP {b.exposed_pp_s:.3f}, bubble {b.bubble_s:.3f}"
        + (f", EP all-to-all {b.exposed_ep_s:.3f}" if b.exposed_ep_s else "")
        + (f", MoE host {b.exposed_host_s:.3f}" if b.exposed_host_s else "")
    )
    verdict = "fits" if m.fits else f"DOES NOT FIT in {m.capacity_gb:.0f} GB"
    click.echo(
        f"  memory/GPU       {m.total_gb:.1f} GB ({verdict}; stage {m.stage}: weights "
        f"{m.weights_gb:.1f}, grads {m.gradients_gb:.1f}, optimizer {m.optimizer_gb:.1f}, "
        f"activations {m.activations_gb:.1f}, workspace {m.workspace_gb:.1f})"
    )
    for text in result.assumptions:
        if text.startswith(("accuracy:", "note:")):
            text = text.removeprefix("accuracy: ").removeprefix("note: ")
            click.echo(f"  note: {text}")
