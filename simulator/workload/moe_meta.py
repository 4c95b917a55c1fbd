"""The token dispatcher's routing metadata: per-expert token counts, the host's wait for
them, and the routing probabilities' own all-to-all.

Megatron-Core's all-to-all dispatcher (`token_dispatcher.py`, `MoEAlltoAllTokenDispatcher`)
runs, per MoE layer and micro-batch, besides the tokens' all-to-alls:

* `preprocess`: the tokens this rank sends to each expert (`routing_map.sum(dim=0)`: one
  reduction reading the [T_sp, experts] boolean map) and, with EP (or expert TP) > 1, their
  all-gather over the EP group (`gather_from_sequence_parallel_region(num_local_tokens_per_
  expert, group=self.tp_ep_group)`: experts int64 counts a rank; lumos gathers over the EP
  group also under expert TP, where Megatron's group is tp x ep) and a few reductions of
  the gathered counts — the split sizes of the all-to-alls and each local expert's rows
  (the gather on its own stream, `COUNTS_STREAM`: another communicator than the
  all-to-alls', so it does not queue behind them under the all-to-all overlap; the
  compute stream waits for it, as PyTorch's current stream waits for a NCCL collective);
* the device-to-host copy of those counts (`_maybe_dtoh_and_synchronize` at
  `cuda_dtoh_point` "before_permutation_1", on a side stream after the preprocess) and the
  host's wait for it (`cuda_sync_point` "before_ep_alltoall" with EP or TP > 1: the split
  sizes must be on the host before the all-to-all is issued): the host cannot issue the
  dispatch until the GPU has finished the preprocess and the copy has landed. One wait per
  MoE layer's forward; the backward reuses the host's split sizes (no wait); none under
  drop-and-pad routing (`if not self.drop_and_pad`: every expert gets its capacity, the
  counts are host constants);
* `token_dispatch`: a second all-to-all of the routing probabilities with the same splits
  (`global_probs = all_to_all(self.ep_group, permuted_probs, ...)`, T_sp·top_k FP32
  values — the router's `moe_router_dtype` fp32 in the recipes read: Megatron-MoE-ModelZoo
  Qwen3-235B-A22B.yaml `--moe-router-dtype: fp32`), which the sort by local expert waits
  for (`sort_chunks_by_idxs(..., probs=global_probs)`), and its gradient's all-to-all in
  the backward (launched before the tokens' gradient: "Backward launch order: probs A2A ->
  tokens A2A").

The flex dispatcher (DeepEP) sends the probabilities with the tokens and computes its
layout on the GPU (`get_dispatch_layout`: one small kernel over the [T_sp, top_k] expert
indices), but its normal-mode dispatch also makes the host wait for the received-token
count before launching the dispatch kernel: one wait a forward as well.

The wait is a node on its own stream (`SYNC_STREAM`), after the GPU node that precedes the
copy, lasting `host_copy_ns` of the kernel file (the median host time of an `aten::copy_`:
the copy's completion and the next launch); the dispatch all-to-all waits for it. The GPU
idles only when the work queued behind the copy (the permute) is shorter than that.
"""

from __future__ import annotations

from lumos.simulator.network.api import ALL_GATHER, ALL_TO_ALL
from lumos.simulator.workload import moe_host
from lumos.simulator.workload.block import COUNTS_STREAM, EP, EP_STREAM, SYNC_STREAM, Block
from lumos.simulator.workload.dims import Ctx

INT64 = 8
FP32 = 4
#: the small reductions `preprocess` runs on the gathered counts (the input splits' sum,
#: the local experts' slice, the per-rank and per-local-expert sums, the TP splits' sum):
#: five latency-bound kernels, priced as one node
SPLIT_KERNELS = 5
#: a block mark holding the host wait of one layer's dispatch, between `counts` and `wait`
_PENDING = "{tag}.moe.pending_sync"


def counts(blk: Block, ctx: Ctx, tag: str, after: int) -> int:
    """The per-expert token counts after the top-k `after` (all-to-all dispatcher, dropless)
    and, for the flex dispatcher, DeepEP's dispatch layout; remembers the host's wait for
    them (`wait`). Returns the last GPU node."""
    p, e = ctx.plan, ctx.model.experts
    name = f"{tag}.moe"
    if p.dispatcher == "flex":
        nbytes = ctx.T_sp * ctx.model.top_k * INT64 + ctx.T_sp * p.ep + 2 * e * FP32
        last = blk.compute(f"{name}.dispatch_layout", *ctx.mem(nbytes), waits=(after,))
        blk.mark(_PENDING.format(tag=tag), last)
        return last
    if p.moe_token_drop:
        return after
    nbytes = ctx.T_sp * e + e * INT64  # the boolean routing map read, the counts written
    last = blk.compute(f"{name}.tokens_per_expert", *ctx.mem(nbytes), waits=(after,))
    if p.ep > 1 or p.expert_tp > 1:
        gather = f"{name}.counts_all_gather"
        last = blk.coll(gather, COUNTS_STREAM, ALL_GATHER, e * INT64, EP, last)
        ns = SPLIT_KERNELS * ctx.km.memory_ns(p.ep * e * INT64 * 2)
        last = blk.compute(f"{name}.splits", ns, 0, p.ep * e * INT64 * 2, waits=(last,))
    blk.mark(_PENDING.format(tag=tag), last)
    return last


def wait(blk: Block, ctx: Ctx, tag: str) -> int:
    """The host's wait for this layer's token counts (`counts`), before it issues the
    dispatch, once it has issued the copy (`moe_host.pre`); -1 without one (drop-and-pad
    routing)."""
    gpu = blk.marks.pop(_PENDING.format(tag=tag), -1)
    issued = moe_host.pending_pre(blk, tag)
    if gpu < 0:
        return -1
    ns = ctx.km.physics.host_copy_ns
    return blk.side(f"{tag}.moe.sync", SYNC_STREAM, ns, 0, (gpu, issued))


def probs_exchange(blk: Block, ctx: Ctx, name: str, rows: int, after: int) -> int:
    """The routing probabilities' all-to-all (or its gradient's) beside the tokens' (`rows`
    FP32 values a rank, all-to-all dispatcher with EP only); returns `after` otherwise."""
    if ctx.plan.dispatcher == "flex" or ctx.plan.ep == 1:
        return after
    return blk.coll(name, EP_STREAM, ALL_TO_ALL, rows * FP32, EP, after)
