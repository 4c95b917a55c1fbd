"""Typed records of the hardware configs: GPU, node, fabric, whole system.

The YAML files in this package are data; `lumos.hwconfigs.load` turns them into these
frozen records. Units live in the key names: `_gbps` is gigabytes per second (10^9 B/s,
per direction), `_gbit_per_s` gigabits per second (NIC line rates as marketed), `_ns`
nanoseconds, `_tflops` 10^12 FLOP/s, `_gb` 10^9 bytes. A `LinkSpec` is one class of path as
one GPU sees it (NVLink through NVSwitch, NVLink SHARP, the NIC into the fabric): peak
bandwidth, latency per algorithm step, and the achieved fraction of peak by message size.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from enum import Enum


class Transport(Enum):
    """How the inter-node fabric carries RDMA."""

    INFINIBAND = "infiniband"
    ROCE = "roce"


class FabricTopology(Enum):
    """Shape of the inter-node network."""

    RAIL_OPTIMIZED_FAT_TREE = "rail_optimized_fat_tree"
    FAT_TREE = "fat_tree"


@dataclass(slots=True, frozen=True)
class EfficiencyPoint:
    """Achieved bandwidth / peak for messages of `size_bytes` (per algorithm step)."""

    size_bytes: int
    efficiency: float


@dataclass(slots=True, frozen=True)
class LinkSpec:
    """One path class as one GPU sees it: α (latency per step) and β (1 / achieved bandwidth)."""

    bandwidth_gbps: float
    latency_ns: float
    efficiency: tuple[EfficiencyPoint, ...] = (EfficiencyPoint(1, 1.0),)

    def efficiency_at(self, size_bytes: float) -> float:
        """Achieved fraction of peak for one message, log-linear between table points."""
        points = self.efficiency
        if size_bytes <= points[0].size_bytes:
            return points[0].efficiency
        if size_bytes >= points[-1].size_bytes:
            return points[-1].efficiency
        sizes = [p.size_bytes for p in points]
        i = bisect.bisect_right(sizes, size_bytes)
        lo, hi = points[i - 1], points[i]
        t = (math.log(size_bytes) - math.log(lo.size_bytes)) / (
            math.log(hi.size_bytes) - math.log(lo.size_bytes)
        )
        return lo.efficiency + t * (hi.efficiency - lo.efficiency)

    def achieved_bytes_per_ns(self, size_bytes: float) -> float:
        """Bandwidth a message of this size achieves, in bytes per ns (= GB/s)."""
        return self.bandwidth_gbps * self.efficiency_at(size_bytes)

    def transfer_ns(self, size_bytes: float) -> float:
        """α + S / (B·η(S)) for one message; 0 bytes still pays the latency."""
        if size_bytes <= 0:
            return self.latency_ns
        return self.latency_ns + size_bytes / self.achieved_bytes_per_ns(size_bytes)


@dataclass(slots=True, frozen=True)
class GpuSpec:
    """Datasheet numbers of one GPU (dense tensor-core peaks)."""

    name: str
    description: str
    peak_bf16_tflops: float
    peak_fp16_tflops: float
    peak_tf32_tflops: float
    peak_fp32_tflops: float
    peak_fp64_tflops: float
    peak_fp8_tflops: float | None
    hbm_bandwidth_gbps: float
    hbm_capacity_gb: float


@dataclass(slots=True, frozen=True)
class NodeSpec:
    """One server: GPUs joined by NVLink (through NVSwitch), plus its NICs."""

    name: str
    description: str
    gpu: GpuSpec
    gpus_per_node: int
    nvlink_generation: int
    nvlink: LinkSpec
    nvswitch: bool
    nvls: LinkSpec | None
    nics_per_node: int
    collective_launch_ns: float


@dataclass(slots=True, frozen=True)
class FabricSpec:
    """The inter-node network as one GPU's NIC sees it."""

    name: str
    description: str
    transport: Transport
    topology: FabricTopology
    nic_line_rate_gbit_per_s: float
    nic: LinkSpec
    oversubscription: float
    nodes_per_leaf: int

    @property
    def nic_bandwidth_gbps(self) -> float:
        return self.nic.bandwidth_gbps


@dataclass(slots=True, frozen=True)
class CollectiveChoice:
    """Algorithm per collective: a module name from lumos.simulator.network.collectives, or `auto`."""

    all_reduce: str = "auto"
    all_gather: str = "auto"
    reduce_scatter: str = "auto"
    all_to_all: str = "direct"
    broadcast: str = "auto"


@dataclass(slots=True, frozen=True)
class SystemSpec:
    """A whole cluster: `num_nodes` identical nodes on one fabric. Rank r lives on node r // gpus_per_node."""

    name: str
    description: str
    node: NodeSpec
    fabric: FabricSpec
    num_nodes: int
    collectives: CollectiveChoice = field(default_factory=CollectiveChoice)
    source: str = ""

    @property
    def gpu(self) -> GpuSpec:
        return self.node.gpu

    @property
    def gpus_per_node(self) -> int:
        return self.node.gpus_per_node

    @property
    def world_size(self) -> int:
        return self.num_nodes * self.node.gpus_per_node

    def node_of(self, rank: int) -> int:
        return rank // self.node.gpus_per_node
