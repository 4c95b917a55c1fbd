"""ZeRO-3 fetched tensor by tensor and blocking: DeepSpeed's stage 3 as of 2021.

The efficient FSDP of `chunk` gathers one flat buffer per layer, prefetched on the DP
stream. DeepSpeed's first ZeRO-3 (the version Narayanan et al. 2021 compared against; read
from its `stage3.py` / `partition_parameters.py`) does the same traffic very differently,
and every difference is a mechanism priced here by the existing models, not a factor:

- one collective per weight *tensor*, not per layer; tensors under
  `PERSISTENCE_THRESHOLD` elements (`stage3_param_persistence_threshold`, 1e5: norms and
  biases) stay whole and are never gathered, but their gradients are still
  reduce-scattered one tensor at a time — small messages that pay the ring's full
  (n - 1)-step latency each;
- each collective takes a *list* of n per-rank views, built one `narrow` at a time in
  Python, and PyTorch's `all_gather(list)` / `reduce_scatter(list)` copies them one
  `copy_` at a time (unflatten after a gather, flatten before a reduce-scatter): on the
  host, n views and n copies at the measured eager-op times of the kernel table
  (`host_view_ns`, `host_copy_ns`), on the GPU n copy kernels of S/n bytes (kernel
  model). The copies of a gather are issued while its ring runs; its views come first;
- the fetch before a sub-module is *blocking* (`fetch_sub_module` synchronises the device):
  the gathers start when the compute before them has finished, and the compute after waits
  for them — nothing overlaps;
- released after use, a tensor is gathered again for the recomputed forward and again for
  its backward unless the parameters used in between stay under `MAX_REUSE_DISTANCE`
  elements (`stage3_max_reuse_distance`, 1e9);
- gradients are reduced on the compute stream (`overlap_comm` off, DeepSpeed's default),
  so the next layer's work queues behind them.

GPU work runs on the DP stream and host work on the `HOST` stream, each in issue order,
so the waits above make the chain serial.
"""

from __future__ import annotations

from dataclasses import dataclass

from lumos.simulator.network.api import ALL_GATHER, REDUCE_SCATTER
from lumos.simulator.workload.assemble import AFTER_PREVIOUS_COMPUTE
from lumos.simulator.workload.block import DP, DP_STREAM, HOST, Block
from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.spec import Norm

PERSISTENCE_THRESHOLD = 100_000
MAX_REUSE_DISTANCE = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Tensor:
    """One parameter tensor of a layer, local to a TP rank (elements)."""

    name: str
    elements: int

    @property
    def gathered(self) -> bool:
        return self.elements >= PERSISTENCE_THRESHOLD


def layer_tensors(ctx: Ctx) -> list[Tensor]:
    """A layer's parameter tensors in forward order (norms, weights, biases)."""
    h, m = ctx.h, ctx.model
    norm = [h, h] if m.norm is Norm.LAYERNORM else [h]
    out: list[Tensor] = []

    def linear(name: str, n_in: int, n_out: int, bias_len: int) -> None:
        out.append(Tensor(f"{name}.weight", n_in * n_out))
        if m.bias:
            out.append(Tensor(f"{name}.bias", bias_len))

    out += [Tensor(f"norm1.{i}", n) for i, n in enumerate(norm)]
    linear("qkv", h, ctx.qkv_width, ctx.qkv_width)
    linear("proj", ctx.attn_out_width, h, h)
    out += [Tensor(f"norm2.{i}", n) for i, n in enumerate(norm)]
    linear("fc1", h, ctx.up_width, ctx.up_width)
    linear("fc2", ctx.ffn, h, h)
    return out


def regathered_for_backward(ctx: Ctx) -> list[Tensor]:
    """Gathered tensors fetched again for the backward after the recomputed forward: those
    with at least MAX_REUSE_DISTANCE elements of other tensors used between the two uses
    (the rest of the forward, then the backward down to the tensor)."""
    big = [t for t in layer_tensors(ctx) if t.gathered]
    out = []
    for i, t in enumerate(big):
        between = 2 * sum(u.elements for u in big[i + 1 :])
        if between >= MAX_REUSE_DISTANCE:
            out.append(t)
    return out


def _peers(ctx: Ctx) -> int:
    return ctx.plan.dp * ctx.plan.cp


def _per_peer(ctx: Ctx, total_bytes: float) -> tuple[float, float, float]:
    """(host views, host copies, GPU copies) ns of one list collective over n peers."""
    n, p = _peers(ctx), ctx.km.physics
    gpu, _, _ = ctx.mem(2 * total_bytes / n)
    return n * p.host_view_ns, n * p.host_copy_ns, n * gpu


def gather(blk: Block, ctx: Ctx, tag: str, tensors: list[Tensor], after: int) -> tuple[int, ...]:
    """Blocking fetch of `tensors` after node `after`; returns the nodes to wait for."""
    last: tuple[int, ...] = (after,)
    for t in tensors:
        full = t.elements * BF16
        views, copies, gpu = _per_peer(ctx, full)
        name = f"{tag}.{t.name}"
        v = blk.side(f"{name}.param_views", HOST, views, 0, last)
        if after < 0:  # blocking across blocks too: after the rank's previous compute
            blk.marks.setdefault(AFTER_PREVIOUS_COMPUTE, v)
        ag = blk.coll(f"{name}.param_all_gather", DP_STREAM, ALL_GATHER, full // _peers(ctx), DP, v)
        launch = blk.side(f"{name}.param_unflatten_launch", HOST, copies, 0, (v,))
        unflat = blk.side(f"{name}.param_unflatten", DP_STREAM, gpu, 2 * full, (ag,))
        last = (launch, unflat)
    return last


def reduce(blk: Block, ctx: Ctx, tag: str, tensors: list[Tensor], after: int) -> int:
    """Each tensor's gradient reduce-scattered alone (views and flatten, then the
    collective), in backward order, after node `after`; returns the last collective."""
    last = after
    for t in reversed(tensors):
        full = t.elements * BF16
        views, copies, gpu = _per_peer(ctx, full)
        name = f"{tag}.{t.name}"
        v = blk.side(f"{name}.grad_views", HOST, views, 0, (last,))
        launch = blk.side(f"{name}.grad_flatten_launch", HOST, copies, 0, (v,))
        flat = blk.side(f"{name}.grad_flatten", DP_STREAM, gpu, 2 * full, (v,))
        last = blk.coll(
            f"{name}.grad_reduce_scatter", DP_STREAM, REDUCE_SCATTER, full, DP, (launch, flat)
        )
    return last


def fetch_forward(blk: Block, ctx: Ctx, tag: str) -> tuple[int, ...]:
    """The gathers before one layer's forward."""
    return gather(blk, ctx, tag, [t for t in layer_tensors(ctx) if t.gathered], blk.last_compute)


def fetch_backward(blk: Block, ctx: Ctx, tag: str) -> tuple[int, ...]:
    """The gathers of one layer's backward: the recomputed forward's, then the re-fetches
    (without recomputation, every gathered tensor once)."""
    big = [t for t in layer_tensors(ctx) if t.gathered]
    if ctx.plan.recompute.value == "full":
        big = big + regathered_for_backward(ctx)
    return gather(blk, ctx, tag, big, blk.last_compute)
