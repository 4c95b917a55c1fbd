"""The machine as collectives see it, and the NCCL-like pricer built on it.

`Topology` turns a `SystemSpec` into the three path classes a collective can use: NVLink
through NVSwitch inside a node, NVLink SHARP (NVLS) in the switch, and each GPU's NIC into
the fabric (its bandwidth divided by the oversubscription once a group spans leaves). A
`GroupShape` says how a process group lies on it (nodes, GPUs per node, leaves). Each path
is priced α-β with an achieved-bandwidth efficiency by message size (`LinkSpec`).

`NcclPricer` implements the simulator's `CollectivePricer`: it maps the Chakra collective
type to an algorithm module of `lumos.simulator.network.collectives` (ring, tree, nvls, direct,
hierarchical), named in the system's `collectives` section or picked NCCL-like as the
fastest that supports the group (`auto`) among the algorithms NCCL itself has for that
collective (`NCCL_AUTO`): all-gather and reduce-scatter are rings in NCCL (its tuning model
considers only Ring for them, NVLS inside an H100 node aside), so `auto` never prices them
as a one-latency direct exchange or a hierarchical pipeline. Ranks map to nodes by
rank // gpus_per_node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lumos.errors import ConfigError
from lumos.hwconfigs.schema import CollectiveChoice, LinkSpec, SystemSpec
from lumos.simulator.network.collectives import ALGORITHMS, Kind, kind_of


@dataclass(slots=True, frozen=True)
class GroupShape:
    """How a process group lies on the machine."""

    size: int
    nodes: int
    per_node: int
    leaves: int


class Topology:
    """NVLink domain, NVLS and NICs of one system; prices single messages on each."""

    def __init__(self, system: SystemSpec) -> None:
        self.system = system
        self.nvlink = system.node.nvlink
        self.nvls = system.node.nvls
        self.nic = system.fabric.nic
        self.launch_ns = system.node.collective_launch_ns

    def shape(self, ranks: Sequence[int]) -> GroupShape:
        per_node: dict[int, int] = {}
        for r in ranks:
            node = self.system.node_of(r)
            per_node[node] = per_node.get(node, 0) + 1
        leaves = {n // self.system.fabric.nodes_per_leaf for n in per_node}
        return GroupShape(len(ranks), len(per_node), max(per_node.values()), len(leaves))

    def nic_link(self, shape: GroupShape) -> LinkSpec:
        """One GPU's NIC path; oversubscription bites once the group spans leaves."""
        if shape.leaves > 1 and self.system.fabric.oversubscription > 1:
            return replace(
                self.nic,
                bandwidth_gbps=self.nic.bandwidth_gbps / self.system.fabric.oversubscription,
            )
        return self.nic

    def rails(self, shape: GroupShape) -> int:
        """NICs a node's share of a ring can spread over (one channel per NIC)."""
        return min(shape.per_node, self.system.node.nics_per_node)

    def ring_step_ns(self, shape: GroupShape, message_bytes: float) -> float:
        """One ring step: every member sends `message_bytes` to its neighbour at once.

        Inside a node the step runs on NVLink; across nodes the node's channels spread over
        its NICs, so per-rank ring bandwidth is min(NVLink, rails × NIC) and the step pays
        the network latency.
        """
        if shape.nodes == 1:
            return self.nvlink.transfer_ns(message_bytes)
        nic = self.nic_link(shape)
        bw = min(
            self.nvlink.achieved_bytes_per_ns(message_bytes),
            self.rails(shape) * nic.achieved_bytes_per_ns(message_bytes),
        )
        return max(self.nvlink.latency_ns, nic.latency_ns) + message_bytes / bw

    def p2p_ns(self, size_bytes: int, src: int, dst: int) -> float:
        if src == dst:
            return 0.0
        if self.system.node_of(src) == self.system.node_of(dst):
            return self.nvlink.transfer_ns(size_bytes)
        return self.nic_link(self.shape((src, dst))).transfer_ns(size_bytes)


#: Collectives each algorithm may be picked for by `auto`: the ones NCCL runs it for. NCCL's
#: tuning (src/graph/tuning.cc, 2.8 through 2.19) prices AllGather / ReduceScatter with Ring
#: only (NVLS in one node, CollNet with SHARP: not modelled here), AllReduce with Ring, Tree,
#: NVLS and NVLS-Tree (`hierarchical` stands for the last), AllToAll as point-to-point
#: sends to every peer (`direct`). `None`: every collective. A configured name still forces
#: any algorithm that supports the collective.
NCCL_AUTO: dict[str, tuple[Kind, ...] | None] = {
    "ring": None,
    "tree": (Kind.ALL_REDUCE, Kind.BROADCAST, Kind.REDUCE, Kind.BARRIER),
    "nvls": (Kind.ALL_REDUCE, Kind.BARRIER),
    "direct": (Kind.ALL_TO_ALL, Kind.GATHER, Kind.SCATTER),
    "hierarchical": (Kind.ALL_REDUCE,),
}


def _auto_candidate(name: str, kind: Kind) -> bool:
    kinds = NCCL_AUTO.get(name)
    return kinds is None or kind in kinds


class NcclPricer:
    """CollectivePricer for a lumos SystemSpec: NCCL-like algorithms over α-β links."""

    def __init__(self, system: SystemSpec, choice: CollectiveChoice | None = None) -> None:
        self.system = system
        self.topology = Topology(system)
        self.choice = choice or system.collectives

    def price(self, kind: Kind, size_bytes: int, ranks: Sequence[int]) -> tuple[str, float]:
        """(algorithm, time in ns) of one collective; `auto` picks the fastest at this size."""
        shape = self.topology.shape(ranks)
        configured = getattr(self.choice, kind.config_key, "auto") if kind.config_key else "auto"
        if configured != "auto" and ALGORITHMS[configured].supports(kind, shape, self.topology):
            return configured, ALGORITHMS[configured].time_ns(
                kind, size_bytes, shape, self.topology
            )
        options = [
            (algo.time_ns(kind, size_bytes, shape, self.topology), name)
            for name, algo in ALGORITHMS.items()
            if _auto_candidate(name, kind) and algo.supports(kind, shape, self.topology)
        ]
        best_ns, best = min(options)
        return best, best_ns

    def collective_ns(self, comm_type: int, size_bytes: int, ranks: Sequence[int]) -> int:
        if len(ranks) <= 1:
            return 0
        return round(self.price(kind_of(comm_type), max(size_bytes, 0), ranks)[1])

    def p2p_ns(self, size_bytes: int, src: int, dst: int) -> int:
        return round(self.topology.p2p_ns(size_bytes, src, dst))


def make_pricer(system: SystemSpec, **overrides: Any) -> NcclPricer:
    """NCCL-like pricer for `system`; overrides: `num_nodes` and any CollectiveChoice field.

    Raises ConfigError for an unknown override or algorithm name.
    """
    choice = system.collectives
    for key, value in overrides.items():
        if key == "num_nodes":
            system = replace(system, num_nodes=int(value))
        elif key in CollectiveChoice.__dataclass_fields__:
            if value not in ALGORITHMS and value != "auto":
                raise ConfigError(
                    f"unknown collective algorithm {value!r} for {key}; have {sorted(ALGORITHMS)}"
                )
            choice = replace(choice, **{key: value})
        else:
            raise ConfigError(f"unknown pricer override {key!r}")
    return NcclPricer(system, choice)


def pricer_for_job(hw: str | Path, num_ranks: int) -> NcclPricer:
    """The NCCL-like pricer of system `hw` (short name or YAML) sized for `num_ranks` GPUs.

    The system gets at least as many nodes as the job needs at its GPUs per node.
    Raises ConfigError if `hw` cannot be loaded.
    """
    from lumos.hwconfigs.load import load_system

    system = load_system(str(hw))
    nodes = max(system.num_nodes, -(-num_ranks // system.gpus_per_node))
    return make_pricer(system, num_nodes=nodes)
