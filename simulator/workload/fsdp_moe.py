"""FSDP2 units of one decoder layer: what each block all-gathers and reduce-scatters, and
over which group — a mixture-of-experts layer's routed experts apart from the rest.

PyTorch FSDP2 stacks shard an MoE model in two kinds of unit per block
(pytorch/torchtitan torchtitan/models/llama4/infra/parallelize.py `apply_fsdp` @ 05a6cb3,
which DeepSeek-V3 and Qwen3 MoE reuse): with expert parallelism (`ep` > 1) the routed
experts get their own `fully_shard` over the expert-data-parallel mesh (`efsdp`, what is
left of the data-parallel ranks after EP: `ParallelPlan.expert_dp`, group `EDP`), and the
block's own `fully_shard` over the data-parallel mesh (`fsdp`, group `DP`) takes the
attention, norms, router and shared experts; both use the same mixed-precision policy
(param BF16, reduce `mixed_precision_reduce`, FP32 by default), both are prefetched
together one block ahead, forward and backward (`set_modules_to_forward_prefetch(
[next_block, next_block.moe.experts])`), and with `ep` 1 the experts stay inside the
block's unit. NeMo AutoModel does the same (NVIDIA-NeMo/Automodel
nemo_automodel/components/moe/parallelizer.py `apply_fsdp` @ 4a37629: experts
`fully_shard`-ed over `ep_shard_mesh` when it has more than one rank, else excluded from
the block's FSDP as `ignored_params`: no traffic, kept whole on their EP rank).

A unit over one rank moves nothing (FSDP2 on a one-rank mesh, or AutoModel's ignored
experts); its weights are still this rank's, whole. `Unit.params` are one TP (expert TP)
rank's weights; a dense model's layer is one unit of `chunk.fsdp_layer_params` (so dense
models are generated as before).
"""

from __future__ import annotations

from dataclasses import dataclass

from lumos.simulator.network.api import ALL_GATHER, REDUCE_SCATTER
from lumos.simulator.workload.block import DP, DP_STREAM, EDP, Block
from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.hybrid_spec import kind_params
from lumos.simulator.workload.nccl_share import wire_bytes


@dataclass(frozen=True, slots=True)
class Unit:
    """One `fully_shard` group of a block: its weights on one rank (gathered), those that
    take a gradient (reduced), the group slot it is sharded over and that group's size."""

    prefix: str
    gathered: int
    reduced: int
    group: int
    ranks: int


def dense_layer_params(ctx: Ctx, index: int) -> int:
    """Weights of layer `index` on one TP rank outside its routed experts (a hybrid's by
    its kind, `hybrid_spec.kind_params`)."""
    m = ctx.model
    if m.pattern:
        return ctx.local_params(kind_params(m, m.pattern[index]))
    if m.is_moe_layer(index):
        return ctx.local_params(m.moe_dense_params())
    return ctx.layer_params_local()


def local_experts(ctx: Ctx) -> int:
    """Routed-expert weights of one MoE layer on one rank: `experts / ep` experts, each
    split over expert TP."""
    m, p = ctx.model, ctx.plan
    return m.experts // p.ep * m.expert_params() // p.expert_tp if m.moe else 0


def layer_units(ctx: Ctx, index: int, dense: tuple[int, int]) -> tuple[Unit, ...]:
    """The FSDP2 units of layer `index` (see module doc); `dense` is (gathered, reduced)
    for a dense model's layer (`chunk.fsdp_layer_params`)."""
    p = ctx.plan
    dp = p.dp * p.cp
    if not ctx.model.moe:
        return (Unit("", dense[0], dense[1], DP, dp),)
    block = dense_layer_params(ctx, index)
    experts = local_experts(ctx) if ctx.model.is_moe_layer(index) else 0
    if not experts or p.ep == 1:  # the experts are the block's (torchtitan, ep 1)
        return (Unit("", block + experts, block + experts, DP, dp),)
    return Unit("", block, block, DP, dp), Unit("expert_", experts, experts, EDP, p.expert_dp)


def gathered(units: tuple[Unit, ...]) -> int:
    """Weights the layer's all-gathers bring in (its sharded units'): what FSDP2 copies out
    of the all-gather buffer and holds unsharded beside its shards while the layer runs."""
    return sum(u.gathered for u in units if u.ranks > 1)


def held(units: tuple[Unit, ...]) -> int:
    """All the layer's weights on this rank, sharded units' unsharded."""
    return sum(u.gathered for u in units)


def gather(blk: Block, ctx: Ctx, tag: str, units: tuple[Unit, ...], after: int) -> int:
    """All-gather each sharded unit (per-rank shard size) on the DP stream, block first;
    the last one issued (the stream runs them in order), or -1 where none is sharded."""
    last = -1
    for u in units:
        if u.ranks > 1:
            shard = u.gathered * BF16 // u.ranks
            name = f"{tag}.{u.prefix}param_all_gather"
            last = blk.coll(name, DP_STREAM, ALL_GATHER, shard, u.group, after)
    return last


def reduce(blk: Block, ctx: Ctx, tag: str, units: tuple[Unit, ...], end: int, nbytes: int) -> None:
    """Reduce-scatter each sharded unit's gradients after `end` (the layer's backward) on
    the DP stream, in `nbytes` a gradient element; FSDP2 first copies them into its
    reduce-scatter buffer in the reduce dtype (read BF16, write `nbytes`)."""
    for u in units:
        if u.ranks < 2 or not u.reduced:
            continue
        after = end
        if ctx.fw.fsdp2:
            ns, _, moved = ctx.mem(u.reduced * (BF16 + nbytes))
            after = blk.side(f"{tag}.{u.prefix}fsdp_copy_in", DP_STREAM, ns, moved, (end,))
        name = f"{tag}.{u.prefix}grad_reduce_scatter"
        blk.coll(name, DP_STREAM, REDUCE_SCATTER, u.reduced * nbytes, u.group, after)


def wire(gathers: tuple[Unit, ...], reduces: tuple[Unit, ...], grad_bytes: int) -> float:
    """Bytes one rank moves beside a layer: the `gathers` units' all-gathers (BF16) and
    the `reduces` units' reduce-scatters (`grad_bytes` a gradient), each over its own
    group (`nccl_share.wire_bytes`)."""
    full: dict[tuple[int, int], int] = {}
    for u in gathers:
        full[u.group, u.ranks] = full.get((u.group, u.ranks), 0) + u.gathered * BF16
    for u in reduces:
        full[u.group, u.ranks] = full.get((u.group, u.ranks), 0) + u.reduced * grad_bytes
    return sum(wire_bytes(nbytes, ranks) for (_, ranks), nbytes in full.items())


def notes(moe: bool, zero: int) -> list[str]:
    """The estimate's assumption note for a mixture of experts under FSDP2."""
    if not moe or zero != 3:
        return []
    return [
        "mixture of experts under FSDP2: each block all-gathered and reduce-scattered (FP32) "
        "over DP, its routed experts as their own unit over expert DP (none with ep = dp; "
        "the block's with ep 1), prefetched one block ahead; the router, token permutation "
        "and dispatch kernels are Megatron-Core's (AutoModel's flex dispatcher is its copy; "
        "torchtitan's own permutation kernels are not modelled)"
    ]
