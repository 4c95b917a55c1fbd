"""NVLS: NVLink SHARP all-reduce inside one node; the NVSwitch does the reduction.

Each GPU pushes its buffer into the switch and pulls the reduced result once, so the time is
about S / B_nvls instead of the ring's 2(n−1)/n · S / B_nvlink (H100 nccl-tests: ~480 GB/s
bus bandwidth against ~370 for ring). Needs a node with `nvls` (H100 NVSwitch gen 3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lumos.simulator.network.collectives import Kind

if TYPE_CHECKING:
    from lumos.simulator.network.nccl import GroupShape, Topology


def supports(kind: Kind, shape: GroupShape, topology: Topology) -> bool:
    return (
        kind in (Kind.ALL_REDUCE, Kind.BARRIER)
        and shape.nodes == 1
        and topology.nvls is not None
        and shape.size > 2
    )


def time_ns(kind: Kind, size_bytes: int, shape: GroupShape, topology: Topology) -> float:
    assert topology.nvls is not None
    size = 0 if kind is Kind.BARRIER else size_bytes
    link = topology.nvls
    # efficiency indexed by the per-GPU slice the switch reduces, like the ring's step size
    return (
        topology.launch_ns
        + 2 * link.latency_ns
        + size / link.achieved_bytes_per_ns(size / shape.size)
    )
