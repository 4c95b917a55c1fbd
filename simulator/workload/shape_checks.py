"""How a plan's degrees must fit the model's shape: TP splits the heads, the FFN and the
key/value heads (Megatron-Core and torchtitan split query groups over TP, neither
replicates them); CP cuts the sequence into 2 x cp load-balanced chunks; the interleaved
schedule needs a pipeline to interleave (Megatron-Core's `initialize_model_parallel`
refuses virtual stages without pipeline parallelism); a model with chunked attention
(`ModelSpec.chunk`) is priced as full causal attention, which it equals only up to one
chunk; a hybrid Mamba-2 model (`_check_hybrid`) splits its Mamba heads and groups over TP;
a parallel attention / MLP block (`_check_parallel`) is priced without what its generator
does not model.
Sequence parallelism scatters each CP rank's seq / cp tokens over the TP ranks, which
Megatron-Core only does evenly (megatron/core/tensor_parallel/mappings.py: "First dimension
of the tensor should be divisible by tensor parallel size"); a sliding window under context
parallelism is refused because the ring is priced over the whole causal sequence, not the
window's band (`attention.band` prices the window without CP only).
The plan's other rules (batch, ZeRO, experts, recipes) stay in `plan`."""

from __future__ import annotations

from typing import Protocol

from lumos.errors import ConfigError
from lumos.simulator.workload.framework import profile
from lumos.simulator.workload.pipesplit import SplitPlan
from lumos.simulator.workload.spec import ModelSpec


class _Plan(SplitPlan, Protocol):
    """The plan fields the checks read (`plan.ParallelPlan`): the split's and these."""

    @property
    def tp(self) -> int: ...
    @property
    def cp(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def zero(self) -> int: ...
    @property
    def lora_rank(self) -> int: ...
    @property
    def tp_comm_overlap(self) -> bool: ...
    @property
    def selective_modules(self) -> frozenset[str]: ...
    @property
    def framework(self) -> str: ...
    @property
    def sequence_parallel(self) -> bool: ...
    @property
    def a2a_overlap(self) -> bool: ...


def check_shape(plan: _Plan, model: ModelSpec) -> None:
    """Raise ConfigError naming the first degree `plan` cannot apply to `model` (module
    doc)."""
    for field, size in (("heads", model.heads), ("ffn", model.ffn)):
        if size % plan.tp:
            raise ConfigError(f"plan: tp {plan.tp} must divide {field} ({size})")
    if model.kv_heads % plan.tp:
        raise ConfigError(
            f"plan: tp {plan.tp} must divide the {model.kv_heads} key/value heads (query "
            "groups: Megatron-Core and torchtitan split them over TP, neither replicates them)"
        )
    if plan.seq % (2 * plan.cp if plan.cp > 1 else 1):
        raise ConfigError(f"plan: seq {plan.seq} must divide into 2 x cp chunks")
    local = plan.seq // plan.cp
    if plan.sequence_parallel and plan.tp > 1 and local % plan.tp:
        raise ConfigError(
            f"plan: sequence parallelism splits each CP rank's {local} tokens (seq / cp) over "
            f"tp {plan.tp} ranks, which must divide them (Megatron-Core asserts it); give a seq "
            "that does, or --no-sp"
        )
    windowed = any(model.is_window_layer(i) for i in range(model.layers))
    if plan.cp > 1 and windowed and model.window < plan.seq:
        raise ConfigError(
            f"plan: context parallelism with {model.name}'s sliding window ({model.window} "
            f"keys < seq {plan.seq}) is not modelled: the ring would be priced over the whole "
            "causal sequence, not the window; use cp 1"
        )
    if model.chunk and plan.seq > model.chunk:
        raise ConfigError(
            f"plan: seq {plan.seq} is longer than {model.name}'s attention chunk "
            f"({model.chunk} tokens, attention_chunk_size): chunked attention is modelled as "
            "full causal attention, which it equals only up to one chunk"
        )
    if plan.vp > 1 and plan.pp == 1:
        raise ConfigError(
            f"plan: vp {plan.vp} needs pp > 1 (the interleaved schedule splits each pipeline "
            "stage into virtual stages; Megatron-Core's initialize_model_parallel refuses it "
            "without pipeline parallelism)"
        )
    _check_hybrid(plan, model)
    _check_parallel(plan, model)


def _check_parallel(plan: _Plan, model: ModelSpec) -> None:
    """A parallel block (`parallel_layer`) is generated for dense, non-MLA, pre-norm layers
    only, without TP-comm overlap, LoRA or recompute modules other than `core_attn`, and not
    under torchtitan's selective "op" recompute (its re-run ops are a sequential layer's)."""
    if not model.parallel_block:
        return
    if model.moe or model.mla or model.pattern or model.post_norms:
        raise ConfigError(
            f"{model.name or 'model'}: a parallel attention / MLP block is modelled for dense "
            "layers with multi-head or grouped-query attention and no post-norms"
        )
    op = profile(plan.framework).selective_op and bool(plan.selective_modules)
    if plan.tp_comm_overlap or plan.lora_rank or plan.selective_modules - {"core_attn"} or op:
        raise ConfigError(
            "plan: a parallel attention / MLP block is modelled without TP-comm overlap, "
            "LoRA, recompute modules other than core_attn or torchtitan's selective op "
            "recompute"
        )


def _check_hybrid(plan: _Plan, model: ModelSpec) -> None:
    """A hybrid's Mamba layers as Megatron-Core's `MambaMixer` splits them: TP divides the
    Mamba heads and groups (its asserts); its pipeline as `MambaStack` places layers:
    `num_layers // pp` a stage, no virtual stages (megatron/core/ssm/mamba_block.py
    `_select_layers_for_pipeline_parallel` asserts so), no uneven split. Modelled on the
    megatron framework only, without context parallelism (Megatron's all-to-all of the
    Mamba heads, `MambaContextParallel`), ZeRO-3 (per-layer gathers of layers that differ
    by kind), LoRA (adapters on the Mamba projections are not priced) or the EP all-to-all
    overlap (`moe_overlap` pairs transformer layers)."""
    if not model.pattern:
        return
    m = model.mamba
    if m is not None and (m.heads % plan.tp or m.groups % plan.tp):
        raise ConfigError(
            f"plan: tp {plan.tp} must divide the {m.heads} Mamba heads and {m.groups} groups"
        )
    uneven = plan.first_stage_layers is not None or plan.last_stage_layers is not None
    uneven = uneven or plan.embedding_in_split or plan.loss_in_split or bool(plan.pp_layout)
    if plan.vp > 1 or uneven or model.layers % plan.pp:
        raise ConfigError(
            f"plan: Megatron-Core splits a hybrid model's {model.layers} layers evenly over "
            f"pp {plan.pp} stages, without virtual stages (mamba_block.py): give a pp that "
            "divides them, vp 1 and no uneven split"
        )
    if plan.cp > 1 or plan.zero == 3 or plan.framework != "megatron" or plan.lora_rank:
        raise ConfigError(
            "plan: a hybrid Mamba-2 model is modelled on the megatron framework without "
            "context parallelism, ZeRO-3 or LoRA"
        )
    if plan.a2a_overlap:
        raise ConfigError("plan: a2a_overlap with a hybrid Mamba-2 model is not modelled")
