"""Typed records of ASTRA-sim 2.x input configs (read and written by `config_files`).

Four files describe an ASTRA-sim run besides the workload: the system JSON (collective
algorithms, chunking, endpoint delay, local memory bandwidth), the analytical network YAML
(one entry per dimension: topology, NPU count, bandwidth in GB/s with 1 GB = 2^30 bytes,
latency in ns), the remote-memory JSON and the communicator-group JSON. Each is loaded into
a frozen record here, checked the way ASTRA-sim would use it, and written back with every
key spelled out so no default is left to chance. ASTRA-sim silently ignores unknown system
keys; we refuse them with a "did you mean" and the file name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class SchedulingPolicy(Enum):
    """Order in which ready chunks are served (system key `scheduling-policy`)."""

    LIFO = "LIFO"
    FIFO = "FIFO"
    EXPLICIT = "EXPLICIT"


class CollectiveOptimization(Enum):
    """Multi-dimensional all-reduce plan (system key `collective-optimization`)."""

    BASELINE = "baseline"
    LOCAL_BW_AWARE = "localBWAware"


class AstraTopology(Enum):
    """Building block of one analytical network dimension."""

    RING = "Ring"
    FULLY_CONNECTED = "FullyConnected"
    SWITCH = "Switch"


class MemoryType(Enum):
    """Remote-memory model (remote-memory key `memory-type`)."""

    NO_MEMORY_EXPANSION = "NO_MEMORY_EXPANSION"
    PER_NODE_MEMORY_EXPANSION = "PER_NODE_MEMORY_EXPANSION"
    PER_NPU_MEMORY_EXPANSION = "PER_NPU_MEMORY_EXPANSION"
    MEMORY_POOL = "MEMORY_POOL"


# Collective implementations ASTRA-sim's system layer accepts; `direct`/`oneDirect` may
# carry a window suffix (`direct4`).
IMPLEMENTATIONS = frozenset(
    {
        "ring",
        "oneRing",
        "direct",
        "oneDirect",
        "halvingDoubling",
        "oneHalvingDoubling",
        "doubleBinaryTree",
    }
)

# Keys ASTRA-sim reads that our timing model does not use: kept verbatim, written back.
_PASSTHROUGH_SYSTEM_KEYS = (
    "boost-mode",
    "local-reduction-delay",
    "L",
    "o",
    "g",
    "G",
    "model-shared-bus",
    "trace-enabled",
    "replay-only",
    "all-reduce-implementation-chakra",
    "all-gather-implementation-chakra",
    "all-to-all-implementation-chakra",
)
_REQUIRED_SYSTEM_KEYS = (
    "scheduling-policy",
    "endpoint-delay",
    "active-chunks-per-dimension",
    "preferred-dataset-splits",
    "collective-optimization",
    "local-mem-bw",
    "all-reduce-implementation",
    "all-gather-implementation",
    "reduce-scatter-implementation",
    "all-to-all-implementation",
)
_OPTIONAL_SYSTEM_KEYS = ("roofline-enabled", "peak-perf")
_NETWORK_KEYS = ("topology", "npus_count", "bandwidth", "latency")
_MEMORY_KEYS = (
    "memory-type",
    "remote-mem-latency",
    "remote-mem-bw",
    "num-nodes",
    "num-npus-per-node",
)


def plain_number(value: float) -> int | float:
    """Write 50.0 as 50 so files look like ASTRA-sim's own."""
    return int(value) if float(value).is_integer() else float(value)


@dataclass(slots=True, frozen=True)
class AstraSystemConfig:
    """ASTRA-sim system JSON, one field per key (units in the field names)."""

    scheduling_policy: SchedulingPolicy
    endpoint_delay_ns: int
    active_chunks_per_dimension: int
    preferred_dataset_splits: int
    collective_optimization: CollectiveOptimization
    local_mem_bw_gbps: float
    all_reduce_implementation: tuple[str, ...]
    all_gather_implementation: tuple[str, ...]
    reduce_scatter_implementation: tuple[str, ...]
    all_to_all_implementation: tuple[str, ...]
    roofline_enabled: bool = False
    peak_perf_tflops: float = 0.0
    passthrough: tuple[tuple[str, Any], ...] = field(default=())

    @property
    def num_dims(self) -> int:
        return len(self.all_reduce_implementation)

    def implementation(self, collective: str) -> tuple[str, ...]:
        """Implementation list of `all-reduce`, `all-gather`, `reduce-scatter` or `all-to-all`."""
        table = {
            "all-reduce": self.all_reduce_implementation,
            "all-gather": self.all_gather_implementation,
            "reduce-scatter": self.reduce_scatter_implementation,
            "all-to-all": self.all_to_all_implementation,
        }
        return table[collective]

    def to_dict(self) -> dict[str, Any]:
        """Every key, in a stable order, as ASTRA-sim reads it."""
        out: dict[str, Any] = {
            "scheduling-policy": self.scheduling_policy.value,
            "endpoint-delay": self.endpoint_delay_ns,
            "active-chunks-per-dimension": self.active_chunks_per_dimension,
            "preferred-dataset-splits": self.preferred_dataset_splits,
            "collective-optimization": self.collective_optimization.value,
            "local-mem-bw": plain_number(self.local_mem_bw_gbps),
            "all-reduce-implementation": list(self.all_reduce_implementation),
            "all-gather-implementation": list(self.all_gather_implementation),
            "reduce-scatter-implementation": list(self.reduce_scatter_implementation),
            "all-to-all-implementation": list(self.all_to_all_implementation),
            "roofline-enabled": 1 if self.roofline_enabled else 0,
            "peak-perf": plain_number(self.peak_perf_tflops),
        }
        out.update(dict(self.passthrough))
        return out


@dataclass(slots=True, frozen=True)
class AstraNetworkConfig:
    """Analytical network YAML: per dimension, innermost first."""

    topology: tuple[AstraTopology, ...]
    npus_count: tuple[int, ...]
    bandwidth_gbps: tuple[float, ...]  # GB/s per link per direction, 1 GB = 2^30 bytes
    latency_ns: tuple[float, ...]

    @property
    def num_dims(self) -> int:
        return len(self.topology)

    @property
    def num_npus(self) -> int:
        total = 1
        for n in self.npus_count:
            total *= n
        return total

    def to_dict(self) -> dict[str, Any]:
        return {
            "topology": [t.value for t in self.topology],
            "npus_count": list(self.npus_count),
            "bandwidth": [plain_number(b) for b in self.bandwidth_gbps],
            "latency": [plain_number(v) for v in self.latency_ns],
        }


@dataclass(slots=True, frozen=True)
class AstraMemoryConfig:
    """Remote-memory JSON; exports always use NO_MEMORY_EXPANSION."""

    memory_type: MemoryType = MemoryType.NO_MEMORY_EXPANSION
    passthrough: tuple[tuple[str, Any], ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"memory-type": self.memory_type.value}
        out.update(dict(self.passthrough))
        return out


@dataclass(slots=True, frozen=True)
class AstraCommGroups:
    """Communicator groups: id (>= 1; 0 means all ranks) -> member ranks."""

    groups: tuple[tuple[int, tuple[int, ...]], ...]

    def ranks(self, group_id: int) -> tuple[int, ...]:
        for gid, members in self.groups:
            if gid == group_id:
                return members
        raise KeyError(group_id)

    def to_dict(self) -> dict[str, list[int]]:
        return {str(gid): list(members) for gid, members in self.groups}
