"""One transformer layer's kernels and tensor-parallel collectives, forward and backward.

Megatron-LM's layer on one TP rank (T tokens of a micro-batch, sequence-parallel shard
T_sp): norm → [all-gather] → QKV GEMM → RoPE → attention → output projection →
[reduce-scatter] → residual add → norm → [all-gather] → FC1 → activation → FC2 →
[reduce-scatter] → residual add. Without sequence parallelism the all-gathers vanish and
the reduce-scatters become all-reduces. With TP-comm overlap the GEMM next to each
collective is split into TP chunks, chunk j waiting only for its share (the ring-exchange
pipelining of userbuffers: the all-gathered GEMM starts on the local shard, the
reduce-scattered one sends each chunk's partial sums while the next chunk computes). Backward mirrors it: data-gradient and weight-gradient GEMMs,
the input re-gathered for the weight gradient while the data gradient runs, and the data
gradient's reduce-scatter overlapped with the weight-gradient GEMM (Megatron does both
without any flag). Collectives run on the TP stream; `waits` make the consumer wait.
"""

from __future__ import annotations

from lumos.simulator.network.api import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER
from lumos.simulator.workload import elementwise as ew
from lumos.simulator.workload import fp8, lora
from lumos.simulator.workload.attention import attention_bwd, attention_fwd
from lumos.simulator.workload.block import TP, TP_STREAM, Block
from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.userbuffers import LLAMA3_70B, UbConfig, gemm_key, ub_config, ub_kind


def _chunks(ctx: Ctx, backward: bool = False) -> int:
    """GEMM chunks of an overlapped TP collective: TP under userbuffers (forward and
    backward); PyTorch's async TP decomposes only the forward's (`framework`)."""
    on = ctx.plan.tp_comm_overlap and ctx.sp and not (backward and ctx.fw.async_tp)
    return ctx.plan.tp if on else 1


def _userbuffers(ctx: Ctx) -> bool:
    """TE userbuffers hold SMs for their communication kernels; async TP's copy engines do not."""
    return _chunks(ctx) > 1 and not ctx.fw.async_tp


def _gather_bytes(ctx: Ctx, nbytes: int, dtype: str | None) -> int:
    """Bytes of an all-gathered shard: FP8 (1 byte an element) when a userbuffers
    all-gather feeds an FP8 GEMM — Transformer Engine makes every all-gather buffer FP8
    under FP8 (`initialize_ub`: `fp8_buf = name in layers_all_gather_overlap or ...`)."""
    fp8 = (dtype or ctx.linear_dtype) == "fp8"
    return nbytes // 2 if fp8 and _userbuffers(ctx) else nbytes


def _ub(ctx: Ctx) -> UbConfig:
    """The plan's userbuffers config: the one it names, else NeMo's for its (hidden, TP)."""
    return ub_config(ctx.h, ctx.plan.tp, ctx.linear_dtype == "fp8", ctx.plan.ub_config)


def gathered_gemm(
    blk: Block,
    ctx: Ctx,
    name: str,
    m_n_k: tuple[int, int, int],
    src: int,
    dtype: str | None,
    backward: bool = False,
    gather: int = 0,
) -> int:
    """GEMM whose M (token) side is all-gathered from the SP shards first (`gather`: bytes
    of one shard when the input is not [T_sp, h], e.g. MLA's compressed latents)."""
    m, n, k = m_n_k
    if not ctx.sp:
        return blk.compute(name, *ctx.gemm(m, n, k, dtype))
    c = _chunks(ctx, backward)
    if c >= 4 and _userbuffers(ctx) and gemm_key(name) in _ub(ctx).aggregate:
        c //= 2  # `aggregate`: each ring step brings two shards, the GEMM runs on both
    shard = _gather_bytes(ctx, gather or ctx.act_bytes, dtype)
    if c == 1:
        ag = blk.coll(f"{name}.all_gather", TP_STREAM, ALL_GATHER, shard, TP, src)
        return blk.compute(name, *ctx.gemm(m, n, k, dtype), waits=(ag,))
    # ring exchange: the GEMM starts on the local shard while the next shard arrives
    last = blk.compute(name, *ctx.gemm(m // c, n, k, dtype))
    for _ in range(c - 1):  # each step brings one remote shard: (tp - 1) x size = a shard
        size = shard // (c - 1)
        ag = blk.coll(f"{name}.all_gather", TP_STREAM, ALL_GATHER, size, TP, src)
        last = blk.compute(name, *ctx.gemm(m // c, n, k, dtype), waits=(ag,))
    return last


#: Transformer Engine userbuffers "pipeline" overlap of the row-parallel forward GEMMs with
#: their reduce-scatter: (SMs the communication kernel holds, GEMM splits). The GEMM runs
#: on the other SMs (`set_sm_margin: 1`) in `num_splits` chunks, each chunk's partial sums
#: reduce-scattered while the next computes. The default (Llama 3 70B) config's values;
#: other GEMM shapes take theirs from `userbuffers.NEMO_H100`.
UB_PIPELINE = LLAMA3_70B.reduce
#: userbuffers "bulk" overlaps in the backward of the column-parallel layers: (SMs the
#: input all-gather holds while dgrad runs, SMs the dgrad reduce-scatter holds while wgrad
#: runs), the default config's (`userbuffers`).
UB_BULK = LLAMA3_70B.bulk


def _reduced_gemm(
    blk: Block, ctx: Ctx, name: str, m_n_k: tuple[int, int, int], dtype: str | None = None
) -> tuple[int, ...]:
    """Row-parallel GEMM whose output is reduce-scattered (SP) or all-reduced over TP;
    returns what the consumer waits for. With TP-comm overlap: userbuffers' pipelined
    reduce-scatter (`UB_PIPELINE`)."""
    m, n, k = m_n_k
    if ctx.plan.tp == 1:
        return (blk.compute(name, *ctx.gemm(m, n, k, dtype)),)
    full = ctx.T * ctx.h * BF16
    if not ctx.sp:
        g = blk.compute(name, *ctx.gemm(m, n, k, dtype))
        return (blk.coll(f"{name}.all_reduce", TP_STREAM, ALL_REDUCE, full, TP, g),)
    c, sms = _chunks(ctx), None
    if _userbuffers(ctx):
        ub, kind = _ub(ctx), ub_kind(name)
        held, c = ub.reduce[kind]
        c = c or ctx.plan.tp  # a ring-exchange reduce-scatter: one chunk per TP rank
        sms = ctx.km.physics.sm_count - held
        if kind in ub.fp8_buf and (dtype or ctx.linear_dtype) == "fp8":
            full //= 2  # `fp8_buf`: the GEMM writes FP8 into the buffer it reduce-scatters
    out = []
    for _ in range(c):
        g = blk.compute(name, *ctx.gemm(m // c, n, k, dtype, sms=sms))
        out.append(blk.coll(f"{name}.reduce_scatter", TP_STREAM, REDUCE_SCATTER, full // c, TP, g))
    return tuple(out)


def _cast(blk: Block, ctx: Ctx, name: str, elems: int) -> None:
    """FP8 quantisation of a row-parallel linear's input, which Megatron-Core's TE spec
    leaves to the `TERowParallelLinear` itself (the attention output before the output
    projection, the activation output before FC2): cast alone under sequence parallelism
    (its transpose made before the weight gradient, `_wgrad`), cast-transposed without."""
    fp8.input_cast(blk, ctx, name, elems, transposed=not ctx.sp)


def _wgrad(
    blk: Block,
    ctx: Ctx,
    name: str,
    n_k_m: tuple[int, int, int],
    dtype: str | None = None,
    sms: int | None = None,
    waits: tuple[int, ...] = (),
    transposes: int = 0,
) -> int:
    """A weight-gradient GEMM, after torchao's FP8 operand transposes or Transformer
    Engine's FP8 transposes of `transposes` elements (`fp8`), where they run."""
    n, k, m = n_k_m
    ew.wgrad_transposes(blk, ctx, name, m * (n + k))
    if transposes and (dtype or ctx.linear_dtype) == "fp8":
        fp8.transpose(blk, ctx, name, transposes, waits)
    return blk.compute(f"{name}.wgrad", *ctx.gemm(n, k, m, dtype, True, sms), waits=waits)


def _fc2_cast(blk: Block, ctx: Ctx, name: str) -> None:
    """FC2's FP8 input cast: torchao's or a lone `te.Linear`'s (`ew.input_casts`), else the
    `TERowParallelLinear`'s own — Megatron-Core's MLP runs its activation in BF16 between
    `TELayerNormColumnParallelLinear` and `TERowParallelLinear` (gpt_layer_specs.py), so no
    fused kernel quantises FC2's input (`_cast`)."""
    if ctx.fw.fp8_dynamic or ctx.fw.unfused_casts:
        ew.input_casts(blk, ctx, name, ctx.T * ctx.ffn, 1)
    else:
        _cast(blk, ctx, name, ctx.T * ctx.ffn)


def _input_transposed(ctx: Ctx, fused: bool) -> bool:
    """Whether an FP8 linear's saved input needs Transformer Engine's transpose before its
    weight gradient: a norm-fused input always (LayerNormLinear), a cast one under
    sequence parallelism; never when the forward cast-transposed it (`fused` False
    without SP, or a lone `te.Linear`'s cast under `unfused_casts`)."""
    if ctx.fw.unfused_casts:
        return False
    return fused or ctx.sp


def _window(ctx: Ctx, index: int) -> int:
    """The sliding-window span of layer `index` (0: full causal attention)."""
    return ctx.model.window if index >= 0 and ctx.model.is_window_layer(index) else 0


def layer_forward(
    blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...] = (), index: int = -1
) -> int:
    """Append layer `index`'s forward (-1: a dense layer); its first kernel waits for
    `waits`. Returns the last node. A mixture-of-experts layer's MLP is `moe`'s, a hybrid
    model's layers `hybrid`'s."""
    if ctx.model.pattern:
        from lumos.simulator.workload.hybrid import hybrid_forward

        return hybrid_forward(blk, ctx, tag, waits, index)
    if ctx.model.parallel_block:
        from lumos.simulator.workload.parallel_layer import parallel_forward

        return parallel_forward(blk, ctx, tag, waits, index)
    ln2 = attn_forward(blk, ctx, tag, waits, index)
    if index >= 0 and ctx.model.is_moe_layer(index):
        from lumos.simulator.workload.moe import moe_forward

        rs = moe_forward(blk, ctx, tag, ln2)
    else:
        rs = _mlp_forward(blk, ctx, tag, ln2)
    rs = _post_norm(blk, ctx, f"{tag}.post_mlp_norm", rs)
    return blk.compute(f"{tag}.residual2", *ctx.mem(ctx.T_sp * ctx.h * BF16 * 3), waits=rs)


def _post_norm(blk: Block, ctx: Ctx, name: str, waits: tuple[int, ...]) -> tuple[int, ...]:
    """The norm on a sublayer's output before its residual add (`ModelSpec.post_norms`:
    Gemma 2 / 3), after `waits` (the output's reduction); what the residual waits for."""
    if not ctx.model.post_norms:
        return waits
    return (ew.norm(blk, ctx, name, waits=waits),)


def _mlp_forward(blk: Block, ctx: Ctx, tag: str, src: int) -> tuple[int, ...]:
    """A dense MLP's forward after node `src` (its input): FC1 with its input gather, the
    activation, FC2 with its reduce-scatter; returns what the residual waits for."""
    T, h = ctx.T, ctx.h
    ew.input_casts(blk, ctx, f"{tag}.fc1", T * h, 2 if ctx.model.gated else 1)
    gathered_gemm(blk, ctx, f"{tag}.fc1", (T, ctx.up_width, h), src, None)
    lora.forward(blk, ctx, f"{tag}.fc1")
    ew.activation(blk, ctx, f"{tag}.activation")
    _fc2_cast(blk, ctx, f"{tag}.fc2")
    rs = _reduced_gemm(blk, ctx, f"{tag}.fc2", (T, h, ctx.ffn))
    return (*rs, *lora.forward(blk, ctx, f"{tag}.fc2"))


def attn_forward(
    blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...] = (), index: int = -1
) -> int:
    """The attention half of layer `index`'s forward and the second norm; returns the
    norm's node (what the MLP's input gather waits for)."""
    T, h = ctx.T, ctx.h
    ln = ew.norm(blk, ctx, f"{tag}.norm1", waits=waits)
    ew.weight_casts(blk, ctx, tag)
    if ctx.model.mla:
        from lumos.simulator.workload.mla import mla_forward

        mla_forward(blk, ctx, tag, ln)
    else:
        ew.input_casts(blk, ctx, f"{tag}.qkv", T * h, 3)
        gathered_gemm(blk, ctx, f"{tag}.qkv", (T, ctx.qkv_width, h), ln, None)
        lora.forward(blk, ctx, f"{tag}.qkv")
        ew.qk_prep(blk, ctx, tag)
    attention_fwd(blk, ctx, tag, _window(ctx, index))
    _cast(blk, ctx, f"{tag}.proj", T * ctx.attn_out_width)
    rs = _reduced_gemm(blk, ctx, f"{tag}.proj", (T, h, ctx.attn_out_width))
    rs = (*rs, *lora.forward(blk, ctx, f"{tag}.proj"))
    rs = _post_norm(blk, ctx, f"{tag}.post_attn_norm", rs)
    blk.compute(f"{tag}.residual1", *ctx.mem(ctx.T_sp * h * BF16 * 3), waits=rs)
    return ew.norm(blk, ctx, f"{tag}.norm2")


def _mlp_recompute(blk: Block, ctx: Ctx, tag: str) -> None:
    """Megatron-Core's `mlp` recompute module: the dense MLP is a checkpointed function
    (`tensor_parallel.checkpoint(self.mlp, ...)`), so its whole forward — FC1 with its
    input gather, the activation, FC2 with its reduce-scatter — re-runs before its
    backward; only its input was kept."""
    _mlp_forward(blk, ctx, f"{tag}.recompute", blk.last_compute)


def _row_backward(blk: Block, ctx: Ctx, name: str, n: int, k: int) -> None:
    """Backward of a row-parallel linear (fwd M=T, N=n, K=k): its LoRA adapter's (`lora`),
    gather dY, dgrad, wgrad (none for a frozen weight)."""
    T = ctx.T
    lora.backward(blk, ctx, name)
    ub = ctx.sp and _userbuffers(ctx)  # dY cast on the shard and all-gathered in FP8
    fp8.grad_cast(blk, ctx, f"{name}.grad", T * n, gathered=ub)
    ew.bias_grad(blk, ctx, name, T * n)
    src = blk.last_compute
    gathered_gemm(blk, ctx, f"{name}.dgrad", (T, k, n), src, None, backward=True)
    transposes = T * k * _input_transposed(ctx, False) + T * n * ub
    if not ctx.plan.lora_rank:
        _wgrad(blk, ctx, name, (k, n, T), transposes=transposes)


def col_backward(
    blk: Block,
    ctx: Ctx,
    name: str,
    n: int,
    k: int,
    dtype: str | None = None,
    gather: int = 0,
    waits: tuple[int, ...] = (),
    wgrad: bool = True,
    reduce: bool = True,
) -> tuple[int, ...]:
    """Backward of a column-parallel linear (fwd M=T, N=n, K=k). Megatron re-gathers the
    saved input (`gather` bytes a shard, default [T_sp, h]) while dgrad runs and reduces
    dgrad's output while wgrad runs; DTensor (torchtitan) saved the gathered input and
    reduces after both GEMMs (`framework`). dgrad also waits for `waits`. Without
    `wgrad` (a deferred one, `deferred_wgrads`; a frozen one under LoRA) neither the
    re-gather nor the wgrad runs; a LoRA adapter's backward runs first (`lora`). Without
    `reduce` (a parallel block's shared input, `parallel_layer`) dgrad's output is left
    unreduced and returned in place of its reduction."""
    T, t = ctx.T, ctx.plan.tp
    wgrad = wgrad and not ctx.plan.lora_rank
    adapter = lora.backward(blk, ctx, name) if dtype is None else ()
    if dtype is None:  # a layer's linear (the output layer passes its dtype, no bias)
        fp8.grad_cast(blk, ctx, f"{name}.grad", T * n)
        ew.bias_grad(blk, ctx, name, T * n)
    start = blk.last_compute
    overlap = ctx.fw.tp_backward_overlap
    ag = -1
    if ctx.sp and overlap and wgrad:
        size = _gather_bytes(ctx, gather or ctx.act_bytes, dtype)
        ag = blk.coll(f"{name}.input_all_gather", TP_STREAM, ALL_GATHER, size, TP, start)
    sms: tuple[int | None, int | None] = (None, None)
    held = _ub(ctx).bulk.get(ub_kind(name)) if _userbuffers(ctx) else None
    if held:  # the bulk communication kernels share the SMs with the GEMM they overlap
        sms = (ctx.km.physics.sm_count - held[0], ctx.km.physics.sm_count - held[1])
    dgrad = blk.compute(f"{name}.dgrad", *ctx.gemm(T, k, n, dtype, sms=sms[0]), waits=waits)
    kind = REDUCE_SCATTER if ctx.sp else ALL_REDUCE
    red: tuple[int, ...] = () if reduce else (dgrad,)
    if t > 1 and overlap and reduce:
        red = (blk.coll(f"{name}.dgrad_reduce", TP_STREAM, kind, T * k * BF16, TP, dgrad),)
    xt = T * k if dtype is None and _input_transposed(ctx, True) else 0  # the norm's output
    last = _wgrad(blk, ctx, name, (n, k, T), dtype, sms[1], (ag,), xt) if wgrad else dgrad
    if t > 1 and not overlap and reduce:
        red = (blk.coll(f"{name}.dgrad_reduce", TP_STREAM, kind, T * k * BF16, TP, last),)
    return (*red, *adapter)


def layer_backward(
    blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...] = (), index: int = -1
) -> int:
    """Append layer `index`'s backward (recomputed forward first under full recompute, the
    unsaved ops under torchtitan's selective "op" policy)."""
    if ctx.model.pattern:
        from lumos.simulator.workload.hybrid import hybrid_backward

        return hybrid_backward(blk, ctx, tag, waits, index)
    if ctx.model.parallel_block:
        from lumos.simulator.workload.parallel_layer import parallel_backward

        return parallel_backward(blk, ctx, tag, waits, index)
    h = ctx.h
    if ctx.plan.recompute.value == "full":
        layer_forward(blk, ctx, f"{tag}.recompute", waits, index)
        waits = ()
    elif ctx.plan.recompute.value == "selective" and ctx.fw.selective_op:
        from lumos.simulator.workload.op_recompute import op_recompute

        op_recompute(blk, ctx, tag, waits)
        waits = ()
    blk.compute(f"{tag}.residual2_bwd", *ctx.mem(ctx.T_sp * h * BF16 * 2), waits=waits)
    if ctx.model.post_norms:
        ew.norm(blk, ctx, f"{tag}.post_mlp_norm_bwd", backward=True)
    norms = "layernorm" in ctx.plan.selective_modules  # outputs re-computed, not kept
    if norms:
        ew.norm(blk, ctx, f"{tag}.norm2.recompute")
    if index >= 0 and ctx.model.is_moe_layer(index):
        from lumos.simulator.workload.moe import moe_backward

        red = moe_backward(blk, ctx, tag)
    else:
        if "mlp" in ctx.plan.selective_modules:
            _mlp_recompute(blk, ctx, tag)
        _row_backward(blk, ctx, f"{tag}.fc2", h, ctx.ffn)
        ew.activation(blk, ctx, f"{tag}.activation_bwd", backward=True)
        red = col_backward(blk, ctx, f"{tag}.fc1", ctx.up_width, h)
    return attn_backward(blk, ctx, tag, red, index)


def attn_backward(blk: Block, ctx: Ctx, tag: str, red: tuple[int, ...], index: int = -1) -> int:
    """The backward of the second norm (after `red`, the MLP's input-gradient reduction)
    and of layer `index`'s attention half; returns the last node."""
    h = ctx.h
    norms = "layernorm" in ctx.plan.selective_modules
    ew.norm(blk, ctx, f"{tag}.norm2_bwd", backward=True, waits=red)
    if ctx.model.post_norms:
        ew.norm(blk, ctx, f"{tag}.post_attn_norm_bwd", backward=True)
    _row_backward(blk, ctx, f"{tag}.proj", h, ctx.attn_out_width)
    if "mla_up_proj" in ctx.plan.selective_modules:  # q, k, v re-computed, not kept
        from lumos.simulator.workload.mla import up_forward

        up_forward(blk, ctx, f"{tag}.recompute", (-1, -1))
    attention_bwd(blk, ctx, tag, _window(ctx, index))
    if ctx.model.mla:
        from lumos.simulator.workload.mla import mla_backward

        red = mla_backward(blk, ctx, tag, norms)
        return ew.norm(blk, ctx, f"{tag}.norm1_bwd", backward=True, waits=red)
    ew.qk_prep(blk, ctx, tag, backward=True)
    if norms:
        ew.norm(blk, ctx, f"{tag}.norm1.recompute")
    red = col_backward(blk, ctx, f"{tag}.qkv", ctx.qkv_width, h)
    return ew.norm(blk, ctx, f"{tag}.norm1_bwd", backward=True, waits=red)
