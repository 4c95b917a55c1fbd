"""Tree: NCCL's double binary tree across nodes, a chain inside each node.

Latency grows with log2(nodes) instead of n, so it wins for small and medium messages on
many nodes; its bandwidth term matches the ring's (2·S/B for all-reduce). All-reduce,
broadcast and reduce only, and only across nodes (NCCL does not use it inside one node).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from lumos.simulator.network.collectives import Kind

if TYPE_CHECKING:
    from lumos.simulator.network.nccl import GroupShape, Topology

_KINDS = (Kind.ALL_REDUCE, Kind.BROADCAST, Kind.REDUCE, Kind.BARRIER)


def supports(kind: Kind, shape: GroupShape, topology: Topology) -> bool:
    return kind in _KINDS and shape.nodes > 1


def time_ns(kind: Kind, size_bytes: int, shape: GroupShape, topology: Topology) -> float:
    size = 0 if kind is Kind.BARRIER else size_bytes
    nic = topology.nic_link(shape)
    depth = (
        math.ceil(math.log2(shape.nodes)) * nic.latency_ns
        + (shape.per_node - 1) * topology.nvlink.latency_ns
    )
    # Two trees each carry half the data; rails spread a node's share over its NICs.
    half = size / 2
    bw = min(
        topology.nvlink.achieved_bytes_per_ns(half),
        topology.rails(shape) * nic.achieved_bytes_per_ns(half),
    )
    passes = 2 if kind in (Kind.ALL_REDUCE, Kind.BARRIER) else 1
    return topology.launch_ns + passes * (depth + size / bw)
