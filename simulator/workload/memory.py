"""Memory per GPU of a generated step: weights, gradients, optimizer states, activations.

Per pipeline stage (the busiest is reported): BF16 weights (+ Transformer Engine's cached
FP8 cast and transpose under FP8, `_weight_bytes`; the FP8 weight and its transpose alone
with FP8 parameters), BF16 gradient buffers (FP32, 4 bytes, plus the FP32 reduced shard,
where FSDP2 is kept unsharded under pipeline parallelism, `zero` 3 with `pp` > 1,
`fsdp_pp`: FSDP2 accumulates an unsharded gradient in the reduce dtype while gradient sync
is off, torch `FSDPParam.to_accumulated_grad_if_needed`), Adam's FP32 master weights and
two moments (12 bytes a parameter) — divided over the data-parallel group for the
optimizer states from ZeRO-1, for the gradients too from ZeRO-2 (DeepSpeed stage 2
partitions the reduced gradients; its reduce bucket is left to the workspace) and for
everything from ZeRO-3 (plus two gathered layers) —, activations of every micro-batch
in flight (the most the pipeline order holds at once, `schedule.in_flight`), the logits
of the last stage, and a fixed workspace (CUDA context, library workspaces, NCCL
buffers; `hwconfigs/kernels`). Activations per layer follow Korthikanti et al. 2022,
taken from the tensors this generator's layer actually saves: sequence-parallel tensors
are split over TP, flash attention keeps no score matrix, selective recomputation drops
unfused attention's scores (torchtitan's "op" policy keeps only the block input, the
attention output and every second matmul's output), full recomputation keeps only each
layer's input; the `mlp` recompute module drops a dense MLP's FC1 and activation outputs
(only its input is kept); lumos' `attn_out` module keeps neither the attention output nor
the MLP's input (JAX's `save_only_these_names` policies that name only q, k and v re-run
the attention, the output projection and the residual sum from the layer input: MaxText
`save_qkv_proj`, `recompute_rows.JAX_REMAT`). A parallel attention / MLP block keeps no
MLP input of its own: both branches read the layer input, through one shared norm output
or one a branch. Multi-head latent attention keeps, besides its q, k, v and output, the
two latents before and after their norms (the up-projections' inputs) and the RoPE key;
the up-projections' outputs are re-read by the fused RoPE kernels, whose backward needs
no input, so they are not kept; under the `mla_up_proj` recompute module q, k and v are
not kept either. Mixture of experts: the routed experts' weights, gradients and optimizer
states are those of this rank's `experts / ep` experts (split over expert TP), the optimizer
states divided over the expert-data-parallel group (under FSDP2 their weights and
gradients too, `fsdp_moe`: with `ep` 1 the block's group); an MoE layer keeps its router logits,
the permuted tokens (top_k copies of each, FC1's input), the expert FC1 and activation
outputs (Megatron-Core applies the routing probabilities inside the activation, so the
expert outputs are not kept), plus its shared expert's activations. Under FP8 the two
grouped GEMMs' inputs (the permuted tokens, the activation output) are kept as
Transformer Engine keeps them: one FP8 byte per element (`FP8_SAVED`). The dense layers'
Transformer Engine linears under FP8 (every profile but torchao's, `fp8_dynamic`) keep their
input the same way (`_linear_input`): the norm outputs (QKV's and FC1's inputs) and the
activation output (FC2's) take one byte, and the attention output three (the attention
kernel keeps its BF16 output, the projection its FP8 copy; one where core attention is
re-computed). Dropout masks (one byte an
element) are kept only where a model with biases trains with dropout (`ModelSpec.dropout`:
MPT's configs set every pdrop to 0, which PyTorch's dropout returns as the input, keeping
no mask). The last stage's logits and their gradient are FP32 (4 + 4 bytes), or, under a
fused cross-entropy (`Profile.fused_loss`: flash_attn's kernel keeps the BF16 logits it
reads and writes a BF16 gradient), 2 + 2, or, under torchtitan's eager loss
(`Profile.eager_loss`), 12 at its log-softmax backward (`_loss_bytes`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.fsdp_moe import gathered, layer_units
from lumos.simulator.workload.plan import Precision, Recompute
from lumos.simulator.workload.zero3_tensor import layer_tensors

GB = 1e9
FP32 = 4
#: bytes per element of an FP8 grouped-GEMM input kept for the backward: Transformer Engine's
#: GroupedLinear saves the FP8-quantised inputs and drops their row-wise copy, keeping only
#: the column-wise (transposed) data its weight-gradient GEMM reads
#: (transformer_engine/pytorch/module/grouped_linear.py, forward: `inputmat.update_usage(
#: rowwise_usage=False, columnwise_usage=True)` before `save_for_backward`)
FP8_SAVED = 1
#: HBM capacities are quoted in GiB: the A100 / H100 "80GB" are five 16 GiB HBM stacks,
#: 85.9e9 bytes (the hwconfigs files give the quoted number)
GIB = 2**30


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """Bytes per GPU on the busiest stage, by kind, in GB (1e9); `capacity_gb` too (the
    GPU's quoted GiB converted)."""

    weights_gb: float
    gradients_gb: float
    optimizer_gb: float
    activations_gb: float
    workspace_gb: float
    capacity_gb: float
    stage: int

    @property
    def total_gb(self) -> float:
        return (
            self.weights_gb
            + self.gradients_gb
            + self.optimizer_gb
            + self.activations_gb
            + self.workspace_gb
        )

    @property
    def fits(self) -> bool:
        return self.total_gb <= self.capacity_gb

    def to_json(self) -> dict[str, float | int | bool]:
        out: dict[str, float | int | bool] = {
            k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()
        }
        out["total_gb"] = round(self.total_gb, 3)
        out["fits"] = self.fits
        return out


def layer_activation_bytes(ctx: Ctx) -> float:
    """Bytes one layer keeps for its backward, per micro-batch, on one rank (the mean
    over the model's layers when some are mixture-of-experts layers or a hybrid's kinds)."""
    if ctx.model.pattern:  # a hybrid: the mean over its layer kinds
        from lumos.simulator.workload.hybrid_memory import hybrid_activation_bytes

        return hybrid_activation_bytes(ctx)
    dense = _dense_activation_bytes(ctx)
    moe = ctx.model.moe_layers
    if not moe or ctx.plan.recompute is Recompute.FULL:
        return dense
    per_moe = _attention_bytes(ctx) + _moe_mlp_bytes(ctx)
    return (dense * (ctx.model.layers - moe) + per_moe * moe) / ctx.model.layers


def _linear_input(ctx: Ctx) -> int:
    """Bytes per element a linear keeps of its input: one under Transformer Engine's FP8
    (transformer_engine/pytorch/module/linear.py, `_Linear.forward`: `saved_inputmat` is the
    FP8 input, or `saved_inputmat_t` its FP8 transpose, and `inputmat_no_fp8` only without
    FP8; LayerNormLinear saves its FP8 `ln_out` likewise), two otherwise (torchao's float8
    linears keep the high-precision input: `fp8_dynamic` profiles)."""
    return FP8_SAVED if ctx.linear_dtype == "fp8" and not ctx.fw.fp8_dynamic else BF16


def _norm_output(ctx: Ctx, into_linear: bool = True) -> int:
    """A norm's kept output, 0 when Megatron re-computes it (`layernorm` module): the next
    linear's input (`_linear_input`), or BF16 where it is not a TE linear's (an MoE layer's
    pre-MLP norm feeds the router and the token permutation)."""
    width = _linear_input(ctx) if into_linear else BF16
    return 0 if "layernorm" in ctx.plan.selective_modules else ctx.T_sp * ctx.h * width


def _dropout(ctx: Ctx) -> int:
    # GPT-style dropout masks, where the model trains with dropout (module doc)
    return ctx.T_sp * ctx.h if ctx.model.bias and ctx.model.dropout else 0


def _attention_bytes(ctx: Ctx) -> float:
    """What the attention half of a layer keeps (norm input and output, QKV, the
    attention output, unfused attention's scores unless re-computed)."""
    x = ctx.T_sp * ctx.h * BF16
    attn = x + _norm_output(ctx) + ctx.T * ctx.qkv_width * BF16
    # the attention output: the projection keeps its input (`_linear_input`), the attention
    # kernel its BF16 output unless core attention is re-computed; one tensor when both BF16
    kernel = 0 if "core_attn" in ctx.plan.selective_modules else BF16
    out = _linear_input(ctx) + (kernel if _linear_input(ctx) != BF16 else 0)
    if "attn_out" not in ctx.plan.selective_modules:  # else re-computed from q, k, v
        attn += ctx.T * ctx.attn_out_width * out
    attn += _dropout(ctx) + _block_extras(ctx)
    if ctx.model.mla:  # the latents: down-projection outputs and their norms' outputs
        m = ctx.model
        attn += ctx.T_sp * (2 * m.q_lora + 2 * m.kv_lora + m.qk_rope) * BF16
        if "mla_up_proj" in ctx.plan.selective_modules:  # q, k, v re-computed
            attn -= ctx.T * ctx.qkv_width * BF16
    if not ctx.plan.flash_attention and "core_attn" not in ctx.plan.selective_modules:
        attn += ctx.b * ctx.heads * ctx.s * ctx.s * (2 * BF16 + 1)
    return float(attn)


def _block_extras(ctx: Ctx) -> int:
    """What the block traits keep (`ModelSpec`): each post-norm its input (BF16, two a layer),
    the QK-norm the query and key heads before it."""
    m = ctx.model
    post = 2 * ctx.T_sp * ctx.h * BF16 if m.post_norms else 0
    qk = ctx.T * (ctx.heads + ctx.kv_heads) * m.qk_dim * BF16 if m.qk_norm else 0
    return post + qk


def _moe_mlp_bytes(ctx: Ctx) -> float:
    """What an MoE layer's MLP keeps (module doc; no dropout, flash attention path)."""
    from lumos.simulator.workload.moe import FP32, MoeSizes

    z, m = MoeSizes.of(ctx), ctx.model
    x = ctx.T_sp * ctx.h * BF16
    act = 0 if "moe_act" in ctx.plan.selective_modules else z.ffn
    gemm_in = FP8_SAVED if ctx.linear_dtype == "fp8" else BF16  # FC1's and FC2's inputs
    routed = ctx.T_sp * m.experts * FP32 + z.received * (ctx.h + act) * gemm_in
    routed += z.received * z.up * BF16  # FC1's output, the activation's input
    shared = 0
    if m.shared_ffn:
        ffn = m.shared_ffn // ctx.plan.tp
        shared = x + ctx.T * ffn * (3 if m.gated else 2) * BF16
    return float(x + _norm_output(ctx, into_linear=False) + routed + shared)


def _dense_activation_bytes(ctx: Ctx) -> float:
    if ctx.plan.recompute is Recompute.FULL:
        return ctx.T_sp * ctx.h * BF16
    if ctx.plan.lora_rank:  # frozen base linears keep no inputs of their own (`lora`)
        from lumos.simulator.workload.lora import activation_bytes

        return activation_bytes(ctx, _dropout(ctx) * 2 + _block_extras(ctx))
    x = ctx.T_sp * ctx.h * BF16
    if ctx.plan.recompute is Recompute.SELECTIVE and ctx.fw.selective_op:
        # torchtitan's "op" policy: the block input, the attention output and the outputs
        # of every second matmul (half of the seven linears' outputs on the mean step)
        linears = ctx.qkv_width + ctx.h + ctx.up_width + ctx.h  # q k v, o, w1 w3, w2
        return float(x + ctx.T * ctx.attn_out_width * BF16 + ctx.T * linears * BF16 / 2)
    inner = ctx.T * (ctx.up_width * BF16 + ctx.ffn * _linear_input(ctx))  # FC1 out, FC2 in
    inner = 0 if "mlp" in ctx.plan.selective_modules else inner
    mlp_in = 0 if "attn_out" in ctx.plan.selective_modules else x  # re-computed (module doc)
    mlp_norm = _norm_output(ctx)
    if ctx.model.parallel_block:  # the MLP's norm reads the layer input the attention's keeps
        mlp_in, mlp_norm = 0, mlp_norm if ctx.model.parallel_norms == 2 else 0
    mlp = mlp_in + mlp_norm + inner + _dropout(ctx)
    return _attention_bytes(ctx) + float(mlp)


def _gathered_unit(ctx: Ctx) -> int:
    """Weights ZeRO-3 holds gathered at once, in two units (the one computing and the one
    fetched ahead): a layer under FSDP; under DeepSpeed's 2021 per-tensor fetch
    (`fsdp_unit="tensor"`: `fetch_sub_module` gathers one sub-module's weight, released
    after use above `stage3_max_live_parameters`, 1e9) the largest of the layer's tensors
    (`zero3_tensor.layer_tensors`)."""
    if ctx.plan.fsdp_unit != "tensor" and ctx.model.moe:  # the largest layer's units
        lp = ctx.layer_params_local()
        return max(gathered(layer_units(ctx, i, (lp, lp))) for i in range(ctx.model.layers))
    if ctx.plan.fsdp_unit != "tensor":
        return ctx.layer_params_local()
    return max(t.elements for t in layer_tensors(ctx))


def _rematerialised(ctx: Ctx) -> float:
    """What one layer's backward re-creates under recomputation, alive beside every kept
    input: the layer's activations without recomputation less what it keeps (a
    checkpointed layer re-runs its forward right before its own backward)."""
    if ctx.plan.recompute is Recompute.NONE:
        return 0.0
    plain = replace(ctx.plan, recompute=Recompute.NONE, recompute_modules="")
    return layer_activation_bytes(replace(ctx, plan=plain)) - layer_activation_bytes(ctx)


def _weight_bytes(ctx: Ctx) -> int:
    """Bytes per weight: BF16, plus under FP8 Transformer Engine's persistent FP8 cast and
    FP8 transpose where Megatron-Core passes `is_first_microbatch` (TE's
    `get_fp8_weights_scratchpad`: `weight1_fp8` and `weight1_t_fp8` are kept across
    micro-batches; without it they are per-pass placeholders: llm-foundry's `te.Linear`,
    `unfused_casts`); torchao's float8 (`fp8_dynamic`) casts each forward, keeping none."""
    if ctx.plan.precision is not Precision.FP8 or ctx.fw.fp8_dynamic or ctx.fw.unfused_casts:
        return BF16
    if ctx.plan.fp8_param_gather:  # the FP8 weight and its cached transpose (`fp8_params`)
        return 2 * FP8_SAVED
    return BF16 + 2 * FP8_SAVED


def _loss_bytes(ctx: Ctx) -> int:
    """Bytes per logit at the loss's peak (module doc): a fused cross-entropy's BF16 logits
    and gradient (2 + 2); torchtitan's eager `F.cross_entropy(pred.float())` at its
    log-softmax backward: the saved FP32 log-probabilities, NLL's dense FP32 gradient and
    the log-softmax input's FP32 gradient (4 + 4 + 4; its forward peaks at 2 + 4 + 4);
    otherwise FP32 logits and their gradient (4 + 4)."""
    capped = BF16 if ctx.model.logit_softcap else 0  # the capped logits tanh's backward reads
    if ctx.fw.fused_loss:
        return 2 * BF16 + capped
    return (12 if ctx.fw.eager_loss else 8) + capped


def estimate_memory(
    ctx: Ctx,
    stage_params: list[int],
    stage_inflight: list[float],
    workspace_gb: float,
    stage_experts: list[int] | None = None,
    stage_adapters: list[int] | None = None,
) -> MemoryEstimate:
    """Memory of the busiest stage; `stage_inflight[s]` = layers' activations alive at
    once on stage s (in-flight chunk passes x layers per chunk); `stage_experts[s]`: the
    routed-expert weights of stage s on one rank (mixture of experts); `stage_adapters[s]`:
    its LoRA adapters' weights, the only ones trained (`lora`)."""
    plan = ctx.plan
    dp = plan.dp * plan.cp
    best: MemoryEstimate | None = None
    experts = stage_experts or [0] * len(stage_params)
    for stage, (dense, layers_alive) in enumerate(zip(stage_params, stage_inflight, strict=True)):
        params = dense + experts[stage]
        w = float(params * _weight_bytes(ctx))
        g = float(params * BF16)
        if plan.zero == 2:  # DeepSpeed stage 2: each rank keeps its reduced gradient shard
            g = (dense / dp + experts[stage] / plan.expert_dp) * BF16
        if plan.fsdp_under_pp:  # FSDP2's FP32 unsharded accumulator (fsdp_pp)
            g = params * (FP32 + FP32 / dp)
            if experts[stage]:  # and the sharded gradients, experts' over expert DP
                g = params * FP32 + (dense / dp + experts[stage] / plan.expert_dp) * FP32
        o = float(params * 12)
        if plan.zero >= 1:
            o = dense * 12 / dp + experts[stage] * 12 / plan.expert_dp
        if plan.step_zero == 3:  # routed experts sharded over their own group (fsdp_moe)
            edp, wb = (plan.expert_dp if plan.ep > 1 else dp), _weight_bytes(ctx)
            w = dense * wb / dp + experts[stage] * wb / edp + 2 * _gathered_unit(ctx) * BF16
            g = dense * BF16 / dp + experts[stage] * BF16 / edp
        if stage_adapters is not None:  # LoRA: frozen weights, trained BF16 adapters
            a, fsdp = stage_adapters[stage], plan.step_zero == 3
            w, g, o = (
                w + a * BF16 / (dp if fsdp else 1),
                a * BF16 / (dp if plan.zero >= 2 else 1),
                a * 12 / (dp if plan.zero else 1),
            )
        act = layers_alive * layer_activation_bytes(ctx) + _rematerialised(ctx)
        if stage == plan.pp - 1:  # the logits and their gradient, MTP heads' too
            act += (1 + ctx.model.mtp_layers) * ctx.T * ctx.vocab * _loss_bytes(ctx)
        m = MemoryEstimate(
            w / GB,
            g / GB,
            o / GB,
            act / GB,
            workspace_gb,
            ctx.km.gpu.hbm_capacity_gb * GIB / GB,
            stage,
        )
        if best is None or m.total_gb > best.total_gb:
            best = m
    assert best is not None
    return best
