"""LoRA fine-tuning: frozen base weights, low-rank adapters on chosen linear layers.

A plan with `lora_rank` r > 0 trains only LoRA adapters, as NeMo 2.0 and Megatron-Bridge
run them (`LoRA` / `ParallelLinearAdapter`, NVIDIA-NeMo/Megatron-Bridge
src/megatron/bridge/peft/lora.py and utils.py; NVIDIA/NeMo nemo/collections/llm/peft/
lora.py and utils.py). Each adapted linear `W` (`lora_targets`: `qkv`, `proj`, `fc1`, `fc2`,
Megatron-Core's `linear_qkv`, `linear_proj`, `linear_fc1`, `linear_fc2`; default all four,
Megatron-Bridge's and NeMo 2.0's `target_modules` default) computes `W x + (alpha / r) B A x`
with `A` (r x in) and `B` (out x r). What changes against full-parameter training:

* backward: no weight-gradient GEMM for any base weight (the decoder's linears, the output
  layer, the embedding; Transformer Engine skips `wgrad` for a weight without
  `requires_grad`); the data-gradient GEMMs stay, since the adapters below need their
  input gradients; each adapter adds its own GEMMs: forward `A`, `B`, backward dgrad and
  wgrad of both (`forward`, `backward`);
* the adapters are Megatron-Core's plain `ColumnParallelLinear` / `RowParallelLinear`
  (not Transformer Engine): BF16 GEMMs under FP8, while the base GEMMs stay FP8;
* tensor parallelism, as `ParallelLinearAdapter` shards them (NeMo sets the adapter's own
  `sequence_parallel` off): beside a column-parallel base (qkv, fc1) `A` is column-parallel
  over r (r / TP rows, output all-gathered: `gather_output=True`) and `B` column-parallel over
  the output (out / TP rows); the input is the base's layer-norm output, which Transformer
  Engine returns already gathered under sequence parallelism
  (`return_layernorm_output_gathered`), so no gather of its own; `B`'s input gradient is
  all-reduced over TP (r wide), and without sequence parallelism `A`'s too (h wide).
  Beside a row-parallel base (proj, fc2) `A` is row-parallel (its r-wide output
  all-reduced) and `B` column-parallel with its output all-gathered over TP (h wide), then
  scattered back to the sequence shard under sequence parallelism, whose backward
  all-gathers the output gradient; with `lora_a2a` (NeMo `a2a_experimental`, MLPerf
  `LORA_A2A=1`) an all-to-all from hidden shards to sequence shards replaces the gather,
  each way. `r` must divide by TP where a column-parallel layer is adapted;
* data parallelism: only the adapters' gradients are reduced (in buckets, as before) and only
  they reach the optimizer; no parameter all-gather for the frozen weights; the tied
  embedding's gradient all-reduce is gone;
* FSDP (`zero` 3, one unit a layer; Hugging Face PEFT's `LoraLayer` and NeMo AutoModel's
  `LinearLoRA` on PyTorch FSDP2, NVIDIA-NeMo/Automodel nemo_automodel/components/_peft/
  lora.py @ 03bd7a9b: base weight frozen, `A` then `B` on the base's input, scaled by
  alpha / r): `fully_shard` groups a block's frozen weights with its adapters, so the
  frozen weights are still all-gathered before each layer's forward and again before its
  backward (and FSDP2 still copies the whole group out of the gather buffer), but only the
  adapters' gradients are copied into the FP32 reduce buffer and reduce-scattered; the
  embedding and output layer are gathered and never reduced (`chunk.fsdp_layer_params`);
  the optimizer steps a DP shard of the adapters;
* memory (`memory`): weights as before plus the adapters (BF16; both a DP shard under FSDP);
  gradients and Adam states for the adapters only; activations: what the data gradients need (norm inputs, q / k / v,
  the attention output the attention backward reads, FC1's output) and what the adapters'
  weight gradients need (each adapter's input in BF16 — the gathered norm output for qkv /
  fc1, the attention or activation output for proj / fc2 — and its r-wide middle), but not
  the base linears' own saved inputs (`activation_bytes`).

Model FLOPs (`model_flops`): forward and data gradient of the frozen weights (4 x params x
tokens), 6 x the adapters' parameters and the attention (12 x width x keys), no weight
gradient of a frozen weight. NeMo's performance summary counts 2/3 of the full-training
FLOPs for its LoRA rows (its 24.12 LoRA / SFT FLOPs per token: 0.670, 0.669, 0.668), which
is the same less the attention's weightless backward.

Not modelled: adapter dropout's masks and passes, the first layer's skipped input gradient
(its input, the embedding output, needs none), the gather a column adapter runs itself when
the base all-gather is a userbuffers one, the Hugging Face layout's separate q / k / v and
gate / up adapters (one adapter per fused linear here: the extra `A` GEMMs are tiny), how
DTensor shards an adapter under TP (NeMo's `ParallelLinearAdapter` layout is priced);
refused by `plan.check`: mixture-of-experts, MLA, MTP, llm-foundry's FSDP1, FSDP by tensor
or under pipeline parallelism.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lumos.errors import ConfigError
from lumos.simulator.network.api import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL
from lumos.simulator.workload.block import TP, TP_STREAM, Block
from lumos.simulator.workload.dims import BF16, Ctx

if TYPE_CHECKING:
    from lumos.simulator.workload.plan import ParallelPlan
    from lumos.simulator.workload.spec import ModelSpec

#: the linears an adapter can sit beside: Megatron-Core's linear_qkv, linear_proj,
#: linear_fc1, linear_fc2
TARGETS = ("qkv", "proj", "fc1", "fc2")
#: column-parallel base layers (the rest are row-parallel)
COLUMN = frozenset({"qkv", "fc1"})
#: Megatron-Bridge's / NeMo 2.0's default `target_modules` (all four linears):
#: NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/peft/lora.py @ 0191fc5e1b7fb11ef008ce0ec73b7e9f2626d687,
#: `LoRA.target_modules` default ["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"]
DEFAULT_TARGETS = "qkv,proj,fc1,fc2"
#: Adam's FP32 master weight and two moments per trained parameter (`memory`)
OPTIMIZER_STATE_BYTES = 12


def targets(text: str) -> tuple[str, ...]:
    """The adapted linears a plan's `lora_targets` names ('' : `DEFAULT_TARGETS`), in
    layer order; raises ConfigError for an unknown one."""
    given = {t.strip() for t in (text or DEFAULT_TARGETS).split(",") if t.strip()}
    unknown = sorted(given - set(TARGETS))
    if unknown or not given:
        raise ConfigError(
            f"plan: lora_targets {unknown[0] if unknown else text!r} is not a linear LoRA can "
            f"adapt (comma-separated: {', '.join(TARGETS)})"
        )
    return tuple(t for t in TARGETS if t in given)


def check(plan: ParallelPlan, model: ModelSpec) -> None:
    """Raise ConfigError for a LoRA setting `plan` cannot take."""
    rank, text, a2a = plan.lora_rank, plan.lora_targets, plan.lora_a2a
    if rank < 0:
        raise ConfigError(f"plan: lora_rank must be >= 0 (0: full-parameter training), got {rank}")
    if not rank:
        if text or a2a:
            raise ConfigError("plan: lora_targets / lora_a2a need lora_rank > 0")
        return
    chosen = targets(text)
    if plan.framework == "llm-foundry":
        raise ConfigError(
            "plan: LoRA (lora_rank) is not modelled on llm-foundry's FSDP1, whose flat "
            "parameters mix frozen and trained weights (use megatron or a torchtitan profile)"
        )
    if plan.zero == 3 and (plan.fsdp_unit != "layer" or plan.pp > 1):
        raise ConfigError(
            "plan: LoRA with zero 3 is modelled as FSDP2 runs it, one unit a layer without "
            "pipeline parallelism: fsdp_unit 'layer', pp 1"
        )
    if model.moe or model.mla or model.mtp_layers:
        raise ConfigError(
            "plan: LoRA is modelled for dense models without MLA or multi-token prediction"
        )
    if COLUMN.intersection(chosen) and rank % plan.tp:
        raise ConfigError(
            f"plan: lora_rank {rank} must be a multiple of tp ({plan.tp}): the adapter beside a "
            "column-parallel linear splits its rank over TP (Megatron's ColumnParallelLinear)"
        )
    if plan.defer_embedding_wgrad:
        raise ConfigError(
            "plan: defer_embedding_wgrad with LoRA: the frozen output layer has no weight "
            "gradient to defer"
        )
    _check_rank(rank, chosen, model)


def _check_rank(rank: int, chosen: tuple[str, ...], model: ModelSpec) -> None:
    """Refuse a rank above an adapted linear's smaller side: `B A` then has rank at most
    min(in, out), so the extra rank adds weights and GEMM work that cannot change the
    update, and the adapter has more weights than the linear it adapts (Hu et al. 2021,
    LoRA, sec. 4: r << min(d, k)); frameworks accept it (PEFT's `nn.Linear(in, r)` takes
    any r), but a rank that large is almost always a typo, not a LoRA run."""
    for kind in chosen:
        n_in, n_out = _model_widths(model)[kind]
        if rank > min(n_in, n_out):
            raise ConfigError(
                f"plan: lora_rank {rank} is larger than the {kind} linear's smaller side "
                f"({n_in} in, {n_out} out): its update B A has rank at most "
                f"{min(n_in, n_out)}; give lora_rank <= {min(n_in, n_out)} (LoRA ranks are "
                "typically 8-512)"
            )


def _widths(ctx: Ctx, kind: str) -> tuple[int, int]:
    """(input, output) width of base linear `kind` on one TP rank."""
    return {
        "qkv": (ctx.h, ctx.qkv_width),
        "fc1": (ctx.h, ctx.up_width),
        "proj": (ctx.attn_out_width, ctx.h),
        "fc2": (ctx.ffn, ctx.h),
    }[kind]


def layer_params(ctx: Ctx) -> int:
    """One decoder layer's adapter weights on one TP rank (A and B of each target)."""
    r, t = ctx.plan.lora_rank, ctx.plan.tp
    total = 0
    for kind in targets(ctx.plan.lora_targets):
        n_in, n_out = _widths(ctx, kind)
        if kind in COLUMN:  # A: r / t x h; B: out / t x r
            total += r // t * n_in + n_out * r
        else:  # A: r x in / t; B: h / t x r
            total += r * n_in + n_out // t * r
    return total


def _model_widths(m: ModelSpec) -> dict[str, tuple[int, int]]:
    """(input, output) width of each adaptable linear of the whole model (all TP ranks)."""
    return {
        "qkv": (m.hidden, (m.heads + 2 * m.kv_heads) * m.head_dim),
        "fc1": (m.hidden, m.ffn * (2 if m.gated else 1)),
        "proj": (m.heads * m.v_dim, m.hidden),
        "fc2": (m.ffn, m.hidden),
    }


def model_params(m: ModelSpec, rank: int, text: str) -> int:
    """Adapter weights of the whole model (every decoder layer, all TP ranks together)."""
    widths = _model_widths(m)
    return m.layers * sum(rank * sum(widths[k]) for k in targets(text))


def model_flops(model: ModelSpec, plan: ParallelPlan, tokens: int, attention: float) -> float:
    """Model FLOPs of a LoRA step (module doc): 4 x frozen parameters + 6 x adapters per
    token, plus the `attention` term (FLOPs a token)."""
    adapters = model_params(model, plan.lora_rank, plan.lora_targets)
    return tokens * (4.0 * model.params(active=True) + 6.0 * adapters + attention)


def _bf16(ctx: Ctx, m: int, n: int, k: int, wgrad: bool = False) -> tuple[float, float, float]:
    return ctx.gemm(m, n, k, "bf16", wgrad)


def _kind(name: str) -> str:
    """A base linear's kind, the last part of its node name: "<layer>.fc1" → "fc1"."""
    return name.rsplit(".", 1)[-1]


def forward(blk: Block, ctx: Ctx, name: str) -> tuple[int, ...]:
    """The adapter beside base linear `name` (of kind `_kind(name)`) after its GEMM, and
    its add into the base output; returns what the consumer waits for (nothing without an
    adapter)."""
    kind = _kind(name)
    if not ctx.plan.lora_rank or kind not in targets(ctx.plan.lora_targets):
        return ()
    T, h, r, t = ctx.T, ctx.h, ctx.plan.lora_rank, ctx.plan.tp
    n_in, n_out = _widths(ctx, kind)
    w: tuple[int, ...] = ()
    if kind in COLUMN:
        a = blk.compute(f"{name}.lora_a", *_bf16(ctx, T, r // t, n_in))
        if t > 1:  # A's r-wide output gathered over TP (`gather_output=True`)
            w = (
                blk.coll(
                    f"{name}.lora_a.all_gather", TP_STREAM, ALL_GATHER, T * r // t * BF16, TP, a
                ),
            )
        blk.compute(f"{name}.lora_b", *_bf16(ctx, T, n_out, r), waits=w)
        out = T * n_out
    else:
        a = blk.compute(f"{name}.lora_a", *_bf16(ctx, T, r, n_in))
        if t > 1:  # row-parallel A: its partial sums all-reduced
            w = (blk.coll(f"{name}.lora_a.all_reduce", TP_STREAM, ALL_REDUCE, T * r * BF16, TP, a),)
        b = blk.compute(f"{name}.lora_b", *_bf16(ctx, T, h // t, r), waits=w)
        out = ctx.T_sp * h
        w = (_out_exchange(blk, ctx, f"{name}.lora_b", b),) if t > 1 else ()
    # the alpha / r scale and the add into the base output (two element-wise passes)
    return (blk.compute(f"{name}.lora_add", *ctx.mem(out * BF16 * 5), waits=w),)


def _out_exchange(blk: Block, ctx: Ctx, name: str, after: int) -> int:
    """A row adapter's output (or its gradient) between hidden shards and the token
    layout: an all-to-all to sequence shards under `lora_a2a` with sequence parallelism,
    else an all-gather of the hidden shards (the forward's `gather_output`, or the
    backward of the scatter to the sequence shard)."""
    T, h, t = ctx.T, ctx.h, ctx.plan.tp
    if ctx.plan.lora_a2a and ctx.sp:
        return blk.coll(f"{name}.all_to_all", TP_STREAM, ALL_TO_ALL, T * h // t * BF16, TP, after)
    shard = T * h // t * BF16 if not ctx.sp else ctx.act_bytes
    return blk.coll(f"{name}.all_gather", TP_STREAM, ALL_GATHER, shard, TP, after)


def backward(blk: Block, ctx: Ctx, name: str) -> tuple[int, ...]:
    """The adapter's backward beside base linear `name` (before the base's data gradient,
    as autograd runs the later-created branch first): B's dgrad and wgrad, A's dgrad and
    wgrad; returns the input-gradient reductions the next op waits for."""
    kind = _kind(name)
    if not ctx.plan.lora_rank or kind not in targets(ctx.plan.lora_targets):
        return ()
    T, h, r, t = ctx.T, ctx.h, ctx.plan.lora_rank, ctx.plan.tp
    n_in, n_out = _widths(ctx, kind)
    column = kind in COLUMN
    waits: tuple[int, ...] = ()
    if not column and t > 1 and ctx.sp:  # the output gradient back to the hidden shards
        waits = (_out_exchange(blk, ctx, f"{name}.lora_b.grad", blk.last_compute),)
    b_out = n_out if column else h // t
    db = blk.compute(f"{name}.lora_b.dgrad", *_bf16(ctx, T, r, b_out), waits=waits)
    ar: tuple[int, ...] = ()
    if t > 1:  # B's input gradient (r wide) all-reduced over TP (`copy_to` region)
        ar = (blk.coll(f"{name}.lora_b.dgrad_reduce", TP_STREAM, ALL_REDUCE, T * r * BF16, TP, db),)
    blk.compute(f"{name}.lora_b.wgrad", *_bf16(ctx, b_out, r, T, True))
    a_rank = r // t if column else r
    blk.compute(f"{name}.lora_a.dgrad", *_bf16(ctx, T, n_in, a_rank), waits=ar)
    last = blk.compute(f"{name}.lora_a.wgrad", *_bf16(ctx, a_rank, n_in, T, True))
    if column and t > 1 and not ctx.sp:  # A's own input-gradient all-reduce (h wide)
        return (
            blk.coll(f"{name}.lora_a.dgrad_reduce", TP_STREAM, ALL_REDUCE, T * h * BF16, TP, last),
        )
    return ()


def activation_bytes(ctx: Ctx, extras: int) -> float:
    """What one LoRA layer keeps for its backward per micro-batch on one rank (module doc);
    `extras`: the block traits' and dropout's bytes (`memory`)."""
    T, h, r, mods = ctx.T, ctx.h, ctx.plan.lora_rank, ctx.plan.selective_modules
    chosen = targets(ctx.plan.lora_targets)
    x = ctx.T_sp * h * BF16  # each norm's input (its backward)
    norm_out = 0 if "layernorm" in mods else T * h * BF16  # the gathered norm output, BF16
    attn = x + ctx.T * ctx.qkv_width * BF16  # q, k, v for the attention backward
    attn += norm_out * ("qkv" in chosen)
    kernel = "core_attn" not in mods  # the attention kernel's output (its backward)
    if "attn_out" not in mods and (kernel or "proj" in chosen):
        attn += T * ctx.attn_out_width * BF16
    mlp = (0 if "attn_out" in mods else x) + norm_out * ("fc1" in chosen)
    if "mlp" not in mods:  # FC1's output (the activation's backward), FC2's input if adapted
        mlp += T * ctx.up_width * BF16 + T * ctx.ffn * BF16 * ("fc2" in chosen)
    middles = T * r * BF16 * len(chosen)  # each adapter's r-wide middle (B's input)
    if not ctx.plan.flash_attention and kernel:
        attn += ctx.b * ctx.heads * ctx.s * ctx.s * (2 * BF16 + 1)
    return float(attn + mlp + middles + extras)
