"""Our hardware configs in ASTRA-sim's terms: network dimensions, system JSON, memory.

The NVLink domain of a node becomes dimension 0 (a Switch of `gpus_per_node` NPUs, or of
all ranks when the trace fits in one node); the inter-node fabric becomes dimension 1 (a
Switch of nodes). Bandwidths convert from our GB/s (10^9 B/s) to ASTRA-sim's (2^30 B/s),
taking the achieved bandwidth of large messages from the link's efficiency table, since
ASTRA-sim's analytical backend has no size-dependent efficiency. ASTRA-sim charges a
message crossing a Switch two link latencies, so each link gets half our per-step latency.
The system JSON spells out every key; active chunks equal dataset splits (#370).
"""

from __future__ import annotations

from lumos.converters.astra_sim.config import (
    AstraMemoryConfig,
    AstraNetworkConfig,
    AstraSystemConfig,
    AstraTopology,
    CollectiveOptimization,
    MemoryType,
    SchedulingPolicy,
)
from lumos.errors import ConfigError
from lumos.hwconfigs import LinkSpec, SystemSpec

GIB_PER_GB = 1e9 / 2**30
#: ASTRA-sim's Switch topology: a message crosses two links (NPU → switch → NPU).
SWITCH_HOPS = 2
DATASET_SPLITS = 4
ENDPOINT_DELAY_NS = 10


def astra_bandwidth(link: LinkSpec) -> float:
    """A link's large-message achieved bandwidth in ASTRA-sim GB/s (1 GB = 2^30 B)."""
    achieved = link.bandwidth_gbps * link.efficiency[-1].efficiency
    return round(achieved * GIB_PER_GB, 3)


def astra_network(system: SystemSpec, world: int) -> AstraNetworkConfig:
    """Dimensions for `world` ranks on `system`'s nodes. Raises ConfigError if they don't tile."""
    per_node = system.gpus_per_node
    nvlink = system.node.nvlink
    inner = (AstraTopology.SWITCH, astra_bandwidth(nvlink), nvlink.latency_ns / SWITCH_HOPS)
    if world <= per_node:
        if world < 2:
            raise ConfigError("ASTRA-sim needs at least 2 NPUs; the trace has 1 rank")
        dims = [(inner, world)]
    else:
        if world % per_node:
            raise ConfigError(
                f"{world} ranks do not fill whole {system.node.name} nodes of {per_node} GPUs; "
                "pass --astra-sim-network with an ASTRA-sim network file for this shape"
            )
        nic = system.fabric.nic
        bandwidth = astra_bandwidth(nic) / max(system.fabric.oversubscription, 1.0)
        outer = (AstraTopology.SWITCH, round(bandwidth, 3), nic.latency_ns / SWITCH_HOPS)
        dims = [(inner, per_node), (outer, world // per_node)]
    return AstraNetworkConfig(
        topology=tuple(d[0][0] for d in dims),
        npus_count=tuple(d[1] for d in dims),
        bandwidth_gbps=tuple(d[0][1] for d in dims),
        latency_ns=tuple(d[0][2] for d in dims),
    )


def astra_system(system: SystemSpec, num_dims: int) -> AstraSystemConfig:
    """System JSON for `system` with every key written and active chunks = splits."""
    ring = ("ring",) * num_dims
    return AstraSystemConfig(
        scheduling_policy=SchedulingPolicy.LIFO,
        endpoint_delay_ns=ENDPOINT_DELAY_NS,
        active_chunks_per_dimension=DATASET_SPLITS,
        preferred_dataset_splits=DATASET_SPLITS,
        collective_optimization=CollectiveOptimization.LOCAL_BW_AWARE,
        local_mem_bw_gbps=system.gpu.hbm_bandwidth_gbps,
        all_reduce_implementation=ring,
        all_gather_implementation=ring,
        reduce_scatter_implementation=ring,
        all_to_all_implementation=ring,
        roofline_enabled=False,
        peak_perf_tflops=system.gpu.peak_bf16_tflops,
        passthrough=(("boost-mode", 0),),
    )


def astra_memory() -> AstraMemoryConfig:
    """Remote memory off: an export never has memory nodes."""
    return AstraMemoryConfig(MemoryType.NO_MEMORY_EXPANSION)


def one_dimensional(network: AstraNetworkConfig) -> tuple[AstraNetworkConfig, str]:
    """The network collapsed to one dimension for the congestion-aware backend (it
    rejects more): a Switch of every NPU with the slowest dimension's link, since a ring
    over all ranks is paced by its slowest hops. Returns it and a note stating the mapping."""
    slowest = min(range(network.num_dims), key=lambda d: network.bandwidth_gbps[d])
    flat = AstraNetworkConfig(
        topology=(AstraTopology.SWITCH,),
        npus_count=(network.num_npus,),
        bandwidth_gbps=(network.bandwidth_gbps[slowest],),
        latency_ns=(max(network.latency_ns),),
    )
    note = (
        f"congestion-aware backend (1-D only): the {network.num_dims}-D network "
        f"{list(network.npus_count)} is written as one Switch of {network.num_npus} NPUs at "
        f"the slowest dimension's {network.bandwidth_gbps[slowest]} GB/s and the largest "
        f"latency {max(network.latency_ns)} ns"
    )
    return flat, note
