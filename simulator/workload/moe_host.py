"""The host thread of a Megatron-Core MoE layer: the CPU time it takes to issue the layer's
work, which the GPU waits for once dropless routing has emptied its queue.

A dropless MoE layer's forward stops the host at its dispatch until the GPU has counted
the tokens per expert (`moe_meta`: the device-to-host copy of the split sizes and the
host's wait for it). After that wait the GPU's queue is empty, so everything the host
issues from there to the next layer's wait — the dispatch, the experts, the combine, the
next layer's attention, router and dispatcher preprocessing — runs no faster than the
host issues it: per layer, the larger of the GPU's time and the host's. At small micro-
batches (1,024-2,048 tokens a GPU) with many local experts the host is the slower one.

What the host issues per MoE layer (`HostLedger`, counted from Megatron-Core's code at
`NVIDIA/Megatron-LM` `megatron/core/transformer/moe/router.py` @ 005742ff and the
`MoEAlltoAllTokenDispatcher` of `token_dispatcher.py` of the same release, with
`moe_permute_fusion` on and `moe_router_fusion` off, as the Megatron-Bridge performance
recipes set them, aux-loss routing and forced load balancing; read off the code, not
traced):

* Transformer Engine modules (the fused norm + QKV linear, the core attention, the
  projection, the pre-MLP norm), each at `host_te_module_ns` forward and
  `host_te_module_bwd_ns` backward (kernel file; TE's own CPU-time measurements);
* eager PyTorch ops (the router's gating, random logits, top-k / softmax with its maps,
  the aux loss's second softmax / top-k and sums, its tracker and scaler; the
  dispatcher's count reductions, the counts' all-gather, the non-blocking copies and
  stream events; the fused permute, sort, unsort and unpermute; the all-to-alls; the
  FP8 padding; RoPE and the residual adds), each at `host_torch_op_ns`;
* TE's grouped linears: one cuBLASLt call per local expert issued from a host loop,
  `grouped_gemm_expert_ns` each (FC1 and FC2 forward; their data and weight gradients
  backward), as `moe.grouped_gemm` already floors them.

In the generated graph the host's issue is the `MOE_HOST` stream, in issue order: a node
issuing the layer's work up to its copy (`pre`), then the wait for the counts (on
`SYNC_STREAM`: `moe_meta.wait`, which also waits for `pre`), a node issuing the rest of the
layer after the wait (`post`, which the layer's residual add waits for), and in the
backward a node issuing the layer's backward (which the router's gradient waits for). The
breakdown reports the time the `post` nodes add past compute and communication as
`exposed_host_s`, and the `pre` nodes that follow one in the same block (named
`...host_issue_chained`): only after a wait is the GPU's queue known to hold nothing else. Only the all-to-all dispatcher's and DeepEP's
dropless paths under Transformer Engine's grouped GEMM (`grouped_gemm` "te", the Megatron-
Core stacks) carry it; with the kernel file's host times at 0 nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from lumos.simulator.workload.block import MOE_HOST, Block
from lumos.simulator.workload.dims import Ctx

#: a block mark: the node that issued this layer's work up to the counts' copy
_PRE = "{tag}.moe.host_pre"
#: the name endings of the nodes issuing after a wait in the same block (what the breakdown
#: counts): the rest of a layer, and the next layer up to its copy
POST_SUFFIX = ".moe.host_issue_post"
CHAINED_SUFFIX = ".moe.host_issue_chained"
#: a block mark: this block's host has waited at least once
_WAITED = "moe.host_waited"
#: a block mark: the node that issued the rest of this layer's forward after its wait
_POST = "{tag}.moe.host_post"
#: a block mark: the node that issued this layer's backward
_BWD = "{tag}.moe.host_bwd"


@dataclass(frozen=True, slots=True)
class HostLedger:
    """What the host issues for one MoE layer (module doc): Transformer Engine modules and
    eager PyTorch ops before the counts' copy (`pre_*`), after the wait (`post_ops`), and
    in the backward (`bwd_*`; eager ops there are autograd nodes); grouped-GEMM calls are
    counted per local expert (`gemm_calls_*`)."""

    pre_modules: int = 4  # LayerNormColumnParallelLinear, DotProductAttention, proj, pre-MLP norm
    pre_ops: int = 47
    post_ops: int = 13
    gemm_calls_fwd: int = 2  # FC1, FC2
    bwd_modules: int = 4
    bwd_ops: int = 25
    gemm_calls_bwd: int = 4  # FC1 and FC2, data and weight gradients


LEDGER = HostLedger()


def carries_host(ctx: Ctx) -> bool:
    """Whether this plan's MoE layers are priced with their host thread (module doc)."""
    return ctx.plan.grouped_gemm == "te"


def issue_ns(ctx: Ctx) -> tuple[float, float, float]:
    """Host ns to issue one MoE layer: (before the counts' copy, after the wait, backward)."""
    phys, led = ctx.km.physics, LEDGER
    local = ctx.model.experts // ctx.plan.ep
    op, gemm = phys.host_torch_op_ns, phys.grouped_gemm_expert_ns
    pre = led.pre_modules * phys.host_te_module_ns + led.pre_ops * op
    post = led.post_ops * op + led.gemm_calls_fwd * local * gemm
    bwd = led.bwd_modules * phys.host_te_module_bwd_ns + led.bwd_ops * op
    return pre, post, bwd + led.gemm_calls_bwd * local * gemm


def pre(blk: Block, ctx: Ctx, tag: str) -> int:
    """The host issuing this layer's forward up to the counts' copy (after whatever the
    host issued before, in stream order); -1 where not carried."""
    if not carries_host(ctx):
        return -1
    name = f"{tag}{CHAINED_SUFFIX}" if _WAITED in blk.marks else f"{tag}.moe.host_issue"
    idx = blk.side(name, MOE_HOST, issue_ns(ctx)[0], 0, ())
    blk.mark(_PRE.format(tag=tag), idx)
    return idx


def pending_pre(blk: Block, tag: str) -> int:
    """The `pre` node of this layer (what its host wait also waits for); -1 without."""
    return blk.marks.pop(_PRE.format(tag=tag), -1)


def post(blk: Block, ctx: Ctx, tag: str, sync: int) -> int:
    """The host issuing the rest of this layer's forward after its wait `sync`; -1 where
    not carried."""
    if not carries_host(ctx):
        return -1
    ns = issue_ns(ctx)[1]
    idx = blk.side(f"{tag}{POST_SUFFIX}", MOE_HOST, ns, 0, (sync,))
    blk.mark(_POST.format(tag=tag), idx)
    if sync >= 0:
        blk.mark(_WAITED, sync)
    return idx


def pending_post(blk: Block, tag: str) -> int:
    """The `post` node of this layer (what its residual add waits for); -1 without."""
    return blk.marks.pop(_POST.format(tag=tag), -1)


def backward(blk: Block, ctx: Ctx, tag: str) -> None:
    """The host issuing this layer's backward (no wait there: the split sizes are reused);
    what the router's gradient then waits for (`pending_backward`)."""
    if carries_host(ctx):
        idx = blk.side(f"{tag}.moe.host_issue_bwd", MOE_HOST, issue_ns(ctx)[2], 0, ())
        blk.mark(_BWD.format(tag=tag), idx)


def pending_backward(blk: Block, tag: str) -> int:
    """The backward host node of this layer; -1 without."""
    return blk.marks.pop(_BWD.format(tag=tag), -1)
