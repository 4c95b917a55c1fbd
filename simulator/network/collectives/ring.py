"""Ring: every rank sends to its neighbour each step (NCCL's default for large messages).

All-reduce takes 2(n−1) steps of S/n, reduce-scatter and all-gather n−1, broadcast and
reduce are a pipelined chain. Works on any group; across nodes each step pays the network
latency and the ring bandwidth is min(NVLink, rails × NIC) (see `Topology.ring_step_ns`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lumos.simulator.network.collectives import Kind

if TYPE_CHECKING:
    from lumos.simulator.network.nccl import GroupShape, Topology

# Pipeline slices of a broadcast/reduce chain (NCCL splits into chunks of a few hundred kB).
_CHAIN_SLICE_BYTES = 512 * 1024


def supports(kind: Kind, shape: GroupShape, topology: Topology) -> bool:
    return True


def time_ns(kind: Kind, size_bytes: int, shape: GroupShape, topology: Topology) -> float:
    n = shape.size
    step = topology.ring_step_ns
    launch = topology.launch_ns
    if kind in (Kind.ALL_REDUCE, Kind.BARRIER):
        size = 0 if kind is Kind.BARRIER else size_bytes
        return launch + 2 * (n - 1) * step(shape, size / n)
    if kind in (Kind.REDUCE_SCATTER, Kind.REDUCE_SCATTER_BLOCK, Kind.SCATTER, Kind.ALL_TO_ALL):
        return launch + (n - 1) * step(shape, size_bytes / n)
    if kind in (Kind.ALL_GATHER, Kind.GATHER):
        return launch + (n - 1) * step(shape, size_bytes)
    # broadcast / reduce: a chain of n−1 hops, pipelined in slices
    slice_bytes = min(size_bytes, _CHAIN_SLICE_BYTES) or 1
    slices = max(1, -(-size_bytes // slice_bytes))
    return launch + (n - 1 + slices - 1) * step(shape, slice_bytes)
