"""Hierarchical: inside each node first, then across nodes on each GPU's own rail, then back.

All-reduce = reduce-scatter over NVLink → all-reduce of S/g across the nodes over one NIC
per GPU → all-gather over NVLink; with NVLS the two in-node halves are the switch's
reduce and multicast, priced as one NVLS all-reduce (NCCL's NVLS-tree). Reduce-scatter and all-gather use the
matching halves. The phases are pipelined over chunks, so the total is the slowest phase
plus the others divided by the pipeline depth. For groups with several GPUs on each of
several nodes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from lumos.simulator.network.collectives import Kind, nvls, ring

if TYPE_CHECKING:
    from lumos.simulator.network.nccl import GroupShape, Topology

_KINDS = (Kind.ALL_REDUCE, Kind.ALL_GATHER, Kind.REDUCE_SCATTER, Kind.REDUCE_SCATTER_BLOCK)
_PIPELINE_CHUNK_BYTES = 4 << 20
_MAX_DEPTH = 8


def supports(kind: Kind, shape: GroupShape, topology: Topology) -> bool:
    return kind in _KINDS and shape.nodes > 1 and shape.per_node > 1


def time_ns(kind: Kind, size_bytes: int, shape: GroupShape, topology: Topology) -> float:
    g, nodes = shape.per_node, shape.nodes
    intra = replace(shape, size=g, nodes=1, leaves=1)
    inter = replace(shape, size=nodes, per_node=1)
    launch = topology.launch_ns

    def phase(algo_kind: Kind, size: float, where: GroupShape) -> float:
        return ring.time_ns(algo_kind, int(size), where, topology) - launch

    if kind is Kind.ALL_REDUCE:
        if nvls.supports(Kind.ALL_REDUCE, intra, topology):
            inner = nvls.time_ns(Kind.ALL_REDUCE, size_bytes, intra, topology) - launch
            phases = [inner, phase(Kind.ALL_REDUCE, size_bytes / g, inter)]
        else:
            phases = [
                phase(Kind.REDUCE_SCATTER, size_bytes, intra),
                phase(Kind.ALL_REDUCE, size_bytes / g, inter),
                phase(Kind.ALL_GATHER, size_bytes / g, intra),
            ]
        total = size_bytes
    elif kind is Kind.ALL_GATHER:  # size = per-rank shard
        phases = [
            phase(Kind.ALL_GATHER, size_bytes, inter),
            phase(Kind.ALL_GATHER, size_bytes * nodes, intra),
        ]
        total = size_bytes * shape.size
    else:
        phases = [
            phase(Kind.REDUCE_SCATTER, size_bytes, intra),
            phase(Kind.REDUCE_SCATTER, size_bytes / g, inter),
        ]
        total = size_bytes
    depth = max(1, min(_MAX_DEPTH, total // _PIPELINE_CHUNK_BYTES))
    slowest = max(phases)
    return launch + slowest + (sum(phases) - slowest) / depth
