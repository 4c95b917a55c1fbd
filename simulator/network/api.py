"""The interface the simulator prices communication through (`model` and `astra` modes).

Network models (`lumos.simulator.network.nccl.make_pricer`, ASTRA-sim compatible
`lumos.simulator.network.astra.AstraPricer`) implement `CollectivePricer`; the simulator
calls it once per collective instance or send/recv pair and never looks inside.
`FixedBandwidthPricer` is a tiny α-β stand-in for tests and for runs without a hardware
config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

#: CollectiveCommType values (Chakra) used below.
ALL_REDUCE = 0
ALL_GATHER = 2
ALL_TO_ALL = 6
REDUCE_SCATTER = 7


@runtime_checkable
class CollectivePricer(Protocol):
    """Prices a communication operation in integer nanoseconds.

    `comm_type` is a Chakra CollectiveCommType int; `size_bytes` has ASTRA-sim's meaning
    (all-gather: per-rank shard; reduce-scatter: whole input; all-reduce: whole buffer);
    `ranks` are the global ranks of the process group in group order.
    """

    def collective_ns(self, comm_type: int, size_bytes: int, ranks: Sequence[int]) -> int: ...

    def p2p_ns(self, size_bytes: int, src: int, dst: int) -> int: ...


@dataclass(frozen=True, slots=True)
class FixedBandwidthPricer:
    """Ring-algorithm α-β costs over one uniform link: `latency_ns + bytes / bandwidth`.

    Bandwidth in bytes per ns (= GB/s, 1e9). For tests and quick estimates only.
    """

    bandwidth_gbps: float = 100.0
    latency_ns: int = 1000

    def collective_ns(self, comm_type: int, size_bytes: int, ranks: Sequence[int]) -> int:
        n = len(ranks)
        if n <= 1:
            return 0
        if comm_type == ALL_REDUCE:
            steps, chunk = 2 * (n - 1), size_bytes / n
        elif comm_type == ALL_GATHER:
            steps, chunk = n - 1, float(size_bytes)
        elif comm_type in (REDUCE_SCATTER, ALL_TO_ALL):
            steps, chunk = n - 1, size_bytes / n
        else:
            steps, chunk = n - 1, float(size_bytes)
        return int(steps * (self.latency_ns + chunk / self.bandwidth_gbps))

    def p2p_ns(self, size_bytes: int, src: int, dst: int) -> int:
        return int(self.latency_ns + size_bytes / self.bandwidth_gbps)
