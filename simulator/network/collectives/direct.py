"""Direct: every rank exchanges with every peer at once (all-to-all, and RS/AG by scatter).

Peers in the same node are reached over NVLink through the NVSwitch, the others over the
GPU's NIC (PXN-less, one NIC per GPU); both run concurrently, so the time is the slower of
the two volumes plus one latency. Message size per peer is S/n.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lumos.simulator.network.collectives import Kind

if TYPE_CHECKING:
    from lumos.simulator.network.nccl import GroupShape, Topology

_KINDS = (
    Kind.ALL_TO_ALL,
    Kind.ALL_GATHER,
    Kind.REDUCE_SCATTER,
    Kind.REDUCE_SCATTER_BLOCK,
    Kind.GATHER,
    Kind.SCATTER,
)


def supports(kind: Kind, shape: GroupShape, topology: Topology) -> bool:
    return kind in _KINDS


def exchange_ns(per_peer_bytes: float, shape: GroupShape, topology: Topology) -> float:
    """Send `per_peer_bytes` to every other member at once."""
    local_peers = shape.per_node - 1
    remote_peers = shape.size - shape.per_node
    intra = inter = 0.0
    latency = topology.nvlink.latency_ns
    if local_peers:
        intra = local_peers * per_peer_bytes / topology.nvlink.achieved_bytes_per_ns(per_peer_bytes)
    if remote_peers:
        nic = topology.nic_link(shape)
        inter = remote_peers * per_peer_bytes / nic.achieved_bytes_per_ns(per_peer_bytes)
        latency = max(latency, nic.latency_ns)
    return latency + max(intra, inter)


def time_ns(kind: Kind, size_bytes: int, shape: GroupShape, topology: Topology) -> float:
    per_peer = size_bytes if kind in (Kind.ALL_GATHER, Kind.GATHER) else size_bytes / shape.size
    return topology.launch_ns + exchange_ns(per_peer, shape, topology)
