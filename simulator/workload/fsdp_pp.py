"""FSDP2 inside a pipeline: what PyTorch's pipelining does to FSDP's traffic and memory.

torchtitan wraps each transformer block in FSDP2's `fully_shard` and, when pipeline
parallelism is on, keeps the gathered parameters after the forward
(`reshard_after_forward=False`: "to avoid per-microbatch all-gathers, which can be
expensive and non-overlapped"; torchtitan/parallelisms/parallelize_llama.py `apply_fsdp`,
2024, later `get_fsdp_reshard_after_forward_policy` "default"); OLMo-core's `apply_fsdp`
does the same. PyTorch's pipelining stage turns FSDP's gradient sync and its resharding
after backward off for every micro-batch but the stage's last, then runs every block's
post-backward at once after that last backward
(torch/distributed/pipelining/stage.py `backward_maybe_with_nosync`, `run_post_backward`).
Per step and stage, so:

* the parameters are all-gathered once, at the first micro-batch's forward, and stay
  unsharded until the last backward: ZeRO-1's parameter all-gather (`ParallelPlan.step_zero`
  is 1; `generate._param_gathers`);
* each micro-batch's backward leaves a fresh BF16 gradient, which FSDP2's post-backward
  hook folds into an FP32 unsharded accumulator on the compute stream
  (`FSDPParam.to_accumulated_grad_if_needed` casts the first, 6 B a parameter;
  `accumulate_unsharded_grad_if_needed` adds each later one: read the BF16 gradient and the
  FP32 sum, write the sum, 10 B). The pass block is the same for every micro-batch, so
  each pays 10 B (`accumulate`; the first one's 4 B too many is 4 / micro-batches B on
  the mean pass);
* after the stage's last backward, each block's FP32 gradients are copied into the
  reduce-scatter input (`foreach_reduce`'s chunk-cat: read and write FP32 on the
  reduce-scatter stream) and reduce-scattered in FP32 (torchtitan's `mixed_precision_reduce
  = float32`): issued when the pass ends, not layer by layer (`reduce`);
* memory: the stage's unsharded BF16 parameters and FP32 unsharded gradients plus the
  sharded FP32 master and Adam states (`memory.estimate_memory`).
"""

from __future__ import annotations

from lumos.simulator.network.api import REDUCE_SCATTER
from lumos.simulator.workload.block import DP_STREAM, Block, Frozen, Names
from lumos.simulator.workload.dims import Ctx

FP32 = 4
#: bytes per parameter of one micro-batch's gradient folded into the FP32 accumulator
ACCUMULATE_BYTES = 10
#: bytes per parameter of the copy into the FP32 reduce-scatter input (read + write FP32)
COPY_IN_BYTES = 2 * FP32


def accumulate(blk: Block, ctx: Ctx, tag: str, params: int) -> int:
    """One micro-batch's BF16 gradients of `params` weights added into the FP32 unsharded
    accumulator, on the compute stream after the backward that made them."""
    return blk.compute(f"{tag}.fsdp_grad_accumulate", *ctx.mem(params * ACCUMULATE_BYTES))


def reduce(names: Names, ctx: Ctx, params: int, group: int, name: str) -> Frozen:
    """The post-backward reduction of `params` accumulated FP32 gradients over `group`:
    the copy into the reduce-scatter input, then the FP32 reduce-scatter, both on the DP
    stream."""
    blk = Block(names)
    ns, _, nbytes = ctx.mem(params * COPY_IN_BYTES)
    copied = blk.side(f"{name}.fsdp_copy_in", DP_STREAM, ns, nbytes, (-1,))
    blk.coll(name, DP_STREAM, REDUCE_SCATTER, params * FP32, group, copied)
    return blk.freeze()
