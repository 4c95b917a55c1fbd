"""One parallel-block layer's kernels and tensor-parallel collectives: attention and MLP side
by side on the same layer input, their outputs summed into one residual add.

`x + attn(norm_a(x)) + mlp(norm_m(x))` (GPT-J, GPT-NeoX, Falcon, PaLM, Cohere, Phi-2;
`ModelSpec.parallel_block`), with one norm shared by both branches or one a branch
(`parallel_norms`). On one TP rank (T tokens, sequence-parallel shard T_sp):

- forward: the norm(s) → one all-gather per norm output under sequence parallelism (a
  shared norm's gathered output feeds both QKV and FC1) → the attention branch (QKV, RoPE,
  attention, output projection) and the MLP branch (FC1, activation, FC2) with their
  row-parallel outputs left as partial sums → the two summed (one element-wise pass over
  [T, h]) → ONE all-reduce, or reduce-scatter under SP → the residual add. The GPT-NeoX
  library does exactly this under `gpt_j_residual` (megatron/model/transformer.py: the
  attention and MLP row-parallel linears are built with `parallel_output=True`, "we can do
  a single allreduce after we add mlp / attn outputs"; the GPT-NeoX-20B paper, arXiv:
  2204.06745, gives it as the block's reason); a sequential block reduces twice. PaLM's
  fusion of the two branches' input GEMMs into one (Chowdhery et al. 2022, §2) is not
  priced: the GEMMs stay two;
- backward: the reduction's backward once (SP: one all-gather of the output gradient, which
  both FC2's and the projection's data-gradient GEMMs read; without SP nothing), each
  branch's GEMMs as in the sequential layer, and the input-gradient reductions: one per
  norm (a shared norm's two input gradients are accumulated into one buffer — the second
  data-gradient GEMM adds into the first's output — and reduced once; two norms reduce
  each branch's before its own norm's backward). The input re-gather each column-parallel
  linear makes for its weight gradient under SP stays per linear (Megatron's
  `LinearWithGradAccumulationAndAsyncCommunication` re-gathers its own saved input).

Not modelled here (`shape_checks` refuses them with a parallel block): TP-comm overlap
(userbuffers' split GEMMs belong to Megatron-Core's sequential TE layer), mixture of
experts, MLA, post-norms, LoRA, recompute modules other than `core_attn`, and torchtitan's
selective "op" recompute. NeMo's Megatron-Core Falcon layer (`falcon_decoder_layer.py`)
keeps a reduction per branch; lumos prices the fused one above.
"""

from __future__ import annotations

from lumos.simulator.network.api import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER
from lumos.simulator.workload import elementwise as ew
from lumos.simulator.workload import fp8
from lumos.simulator.workload.attention import attention_bwd, attention_fwd
from lumos.simulator.workload.block import TP, TP_STREAM, Block
from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.layer import (
    _cast,
    _fc2_cast,
    _wgrad,
    _window,
    col_backward,
)


def _gather(blk: Block, ctx: Ctx, name: str, src: int) -> tuple[int, ...]:
    """The all-gather of a norm's SP shard (nothing without SP); what its GEMMs wait for."""
    if not ctx.sp:
        return ()
    return (blk.coll(f"{name}.all_gather", TP_STREAM, ALL_GATHER, ctx.act_bytes, TP, src),)


def _reduce(blk: Block, ctx: Ctx, name: str, nbytes: int, after: int) -> tuple[int, ...]:
    """One reduction over TP of `nbytes` (full, unsplit): a reduce-scatter under SP, else an
    all-reduce; nothing at TP 1."""
    if ctx.plan.tp == 1:
        return ()
    kind = REDUCE_SCATTER if ctx.sp else ALL_REDUCE
    suffix = "reduce_scatter" if ctx.sp else "all_reduce"
    return (blk.coll(f"{name}.{suffix}", TP_STREAM, kind, nbytes, TP, after),)


def parallel_forward(
    blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...] = (), index: int = -1
) -> int:
    """Append parallel-block layer `index`'s forward (module doc); its first kernel waits
    for `waits`. Returns the last node (the residual add)."""
    T, h = ctx.T, ctx.h
    ln = ew.norm(blk, ctx, f"{tag}.norm1", waits=waits)
    ag_attn = _gather(blk, ctx, f"{tag}.norm1", ln)
    if ctx.model.parallel_norms == 2:
        ln2 = ew.norm(blk, ctx, f"{tag}.norm2", waits=waits)
        ag_mlp = _gather(blk, ctx, f"{tag}.norm2", ln2)
    else:
        ag_mlp = ag_attn
    ew.weight_casts(blk, ctx, tag)
    ew.input_casts(blk, ctx, f"{tag}.qkv", T * h, 3)
    blk.compute(f"{tag}.qkv", *ctx.gemm(T, ctx.qkv_width, h), waits=ag_attn)
    ew.qk_prep(blk, ctx, tag)
    attention_fwd(blk, ctx, tag, _window(ctx, index))
    _cast(blk, ctx, f"{tag}.proj", T * ctx.attn_out_width)
    blk.compute(f"{tag}.proj", *ctx.gemm(T, h, ctx.attn_out_width))
    ew.input_casts(blk, ctx, f"{tag}.fc1", T * h, 2 if ctx.model.gated else 1)
    blk.compute(f"{tag}.fc1", *ctx.gemm(T, ctx.up_width, h), waits=ag_mlp)
    ew.activation(blk, ctx, f"{tag}.activation")
    _fc2_cast(blk, ctx, f"{tag}.fc2")
    blk.compute(f"{tag}.fc2", *ctx.gemm(T, h, ctx.ffn))
    total = T * h * BF16
    summed = blk.compute(f"{tag}.branch_sum", *ctx.mem(total * 3))  # two partial sums in, one out
    red = _reduce(blk, ctx, f"{tag}.branch_sum", total, summed)
    return blk.compute(f"{tag}.residual", *ctx.mem(ctx.T_sp * h * BF16 * 3), waits=red)


def _row_dgrad(blk: Block, ctx: Ctx, name: str, n_k: tuple[int, int], dy: tuple[int, ...]) -> None:
    """A row-parallel linear's backward reading the shared, gathered output gradient `dy`:
    its gradient cast and bias gradient, dgrad, wgrad (`layer._row_backward` without its
    own gather)."""
    n, k = n_k
    T = ctx.T
    fp8.grad_cast(blk, ctx, f"{name}.grad", T * n)
    ew.bias_grad(blk, ctx, name, T * n)
    blk.compute(f"{name}.dgrad", *ctx.gemm(T, k, n), waits=dy)
    transposes = T * k if ctx.sp and not ctx.fw.unfused_casts else 0  # SP-cast input's
    _wgrad(blk, ctx, name, (k, n, T), transposes=transposes)


def parallel_backward(
    blk: Block, ctx: Ctx, tag: str, waits: tuple[int, ...] = (), index: int = -1
) -> int:
    """Append parallel-block layer `index`'s backward (its forward re-run first under full
    recompute); returns the last node."""
    h = ctx.h
    if ctx.plan.recompute.value == "full":
        parallel_forward(blk, ctx, f"{tag}.recompute", waits, index)
        waits = ()
    res = blk.compute(f"{tag}.residual_bwd", *ctx.mem(ctx.T_sp * h * BF16 * 2), waits=waits)
    dy = _gather(blk, ctx, f"{tag}.residual_bwd", res)
    two = ctx.model.parallel_norms == 2
    _row_dgrad(blk, ctx, f"{tag}.fc2", (h, ctx.ffn), dy)
    ew.activation(blk, ctx, f"{tag}.activation_bwd", backward=True)
    mlp = col_backward(blk, ctx, f"{tag}.fc1", ctx.up_width, h, reduce=two)
    if two:
        ew.norm(blk, ctx, f"{tag}.norm2_bwd", backward=True, waits=mlp)
    _row_dgrad(blk, ctx, f"{tag}.proj", (h, ctx.attn_out_width), dy)
    attention_bwd(blk, ctx, tag, _window(ctx, index))
    ew.qk_prep(blk, ctx, tag, backward=True)
    red = col_backward(blk, ctx, f"{tag}.qkv", ctx.qkv_width, h, reduce=two)
    if not two:  # the two branches' input gradients, accumulated, reduced once
        after = red[0] if ctx.fw.tp_backward_overlap else blk.last_compute
        red = _reduce(blk, ctx, f"{tag}.input_grad", ctx.T * h * BF16, after)
    return ew.norm(blk, ctx, f"{tag}.norm1_bwd", backward=True, waits=red)
