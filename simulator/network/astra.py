"""Collective timing exactly as ASTRA-sim's congestion-unaware analytical backend computes it.

`AstraPricer` reads ASTRA-sim's own system JSON and analytical network YAML and prices a
collective the way ASTRA-sim 2.x does (docs/hardware.md, reference/astra-sim.md):

* one message of S bytes over h hops takes `N(S) = int(h·L + S/B)`, B = GBps·2^30/1e9 B/ns,
  h = 1 (FullyConnected), 2 (Switch), shortest ring distance (Ring);
* the collective is cut into `preferred-dataset-splits` chunks; each chunk runs one phase per
  network dimension (all-reduce with localBWAware: reduce-scatter up the inner dimensions,
  all-reduce on the last, all-gather back down; otherwise the same collective on every
  dimension, all-gather from the outermost down); every step pays the endpoint delay d, every
  reducing step `R(m) = 3·int(m / (local_mem_bw·1e9) · 1e9)`;
* each dimension runs at most `active-chunks-per-dimension` chunk-phases at once (congestion-
  unaware: concurrent chunks do not slow each other); chunks queue FIFO for a dimension;
* a communicator sub-group (ranks ≠ all NPUs) runs as a one-dimensional ring whose step
  time is its slowest hop.

Exact for the published one-dimensional cases (117780, 64440, 323560 ns); multi-dimensional
chunk interleaving follows ASTRA-sim's queue rule but has no published output to check.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lumos.converters.astra_sim.config import (
    AstraNetworkConfig,
    AstraSystemConfig,
    AstraTopology,
    CollectiveOptimization,
)
from lumos.converters.astra_sim.config_files import load_astra_network, load_astra_system
from lumos.errors import SimulationError
from lumos.simulator.network.ring_members import chunked_finish, ring_finish, ring_steps

ALL_REDUCE, ALL_GATHER, ALL_TO_ALL, REDUCE_SCATTER = 0, 2, 6, 7
_NAMES = {
    ALL_REDUCE: "all-reduce",
    ALL_GATHER: "all-gather",
    ALL_TO_ALL: "all-to-all",
    REDUCE_SCATTER: "reduce-scatter",
}


@dataclass(slots=True, frozen=True)
class _Dim:
    """One network dimension: its size and how a message crosses it."""

    topology: AstraTopology
    size: int
    bytes_per_ns: float
    latency_ns: float

    def hops(self, src: int, dst: int) -> int:
        if self.topology is AstraTopology.FULLY_CONNECTED:
            return 1
        if self.topology is AstraTopology.SWITCH:
            return 2
        clockwise = (dst - src) % self.size
        return min(clockwise, self.size - clockwise)

    def message_ns(self, size_bytes: int, hops: int) -> int:
        return int(hops * self.latency_ns + size_bytes / self.bytes_per_ns)


@dataclass(slots=True, frozen=True)
class _Phase:
    """One collective algorithm run on one dimension for one chunk."""

    queue: int  # dimension index, or -1 for a sub-group ring
    duration_ns: int


class AstraPricer:
    """CollectivePricer reproducing ASTRA-sim's congestion-unaware analytical timing."""

    def __init__(self, system: AstraSystemConfig, network: AstraNetworkConfig) -> None:
        if system.num_dims != network.num_dims:
            raise SimulationError(
                f"system config has {system.num_dims} dimension(s) per *-implementation list "
                f"but the network has {network.num_dims}; ASTRA-sim needs one entry per dimension"
            )
        self.system = system
        self.network = network
        self.dims = tuple(
            _Dim(t, n, bw * (1 << 30) / 1_000_000_000, lat)
            for t, n, bw, lat in zip(
                network.topology,
                network.npus_count,
                network.bandwidth_gbps,
                network.latency_ns,
                strict=True,
            )
        )

    @classmethod
    def from_files(cls, system_json: str | Path, network_yml: str | Path) -> AstraPricer:
        """Load ASTRA-sim's system JSON and analytical network YAML. Raises ConfigError."""
        return cls(load_astra_system(system_json), load_astra_network(network_yml))

    @staticmethod
    def for_backend(
        backend: str, system: AstraSystemConfig, network: AstraNetworkConfig
    ) -> AstraPricer:
        """The pricer of an analytical backend (congestion-unaware or congestion-aware)."""
        if backend == "congestion-aware":
            from lumos.simulator.network.congestion_aware import CongestionAwarePricer

            return CongestionAwarePricer(system, network)
        return AstraPricer(system, network)

    @classmethod
    def from_configs(cls, system: AstraSystemConfig, network: AstraNetworkConfig) -> AstraPricer:
        return cls(system, network)

    @property
    def num_npus(self) -> int:
        return self.network.num_npus

    # -- the CollectivePricer protocol ------------------------------------------------------
    def collective_ns(self, comm_type: int, size_bytes: int, ranks: Sequence[int]) -> int:
        """Time of one collective instance; raises SimulationError for types ASTRA-sim does not simulate."""
        if comm_type not in _NAMES:
            raise SimulationError(
                f"ASTRA-sim simulates all-reduce, all-gather, reduce-scatter and all-to-all only "
                f"(comm_type {comm_type}; broadcast takes the node's recorded duration)"
            )
        if len(ranks) <= 1:
            return 0
        for r in ranks:
            if not 0 <= r < self.num_npus:
                raise SimulationError(f"rank {r} is outside the network's {self.num_npus} NPUs")
        chunk, n_chunks = self.chunking(comm_type, size_bytes)
        if len(set(ranks)) == self.num_npus:
            phases = self._world_phases(comm_type, chunk)
        else:
            phases = [_Phase(-1, self._group_ring_ns(comm_type, chunk, ranks))]
        return _schedule([phases] * n_chunks, self.system.active_chunks_per_dimension)

    def chunking(self, comm_type: int, size_bytes: int) -> tuple[int, int]:
        """(chunk bytes, chunks) as ASTRA-sim's determine_chunk_size cuts a collective:
        `preferred-dataset-splits` chunks, each at least one byte per NPU (all-gather
        excepted)."""
        splits = self.system.preferred_dataset_splits
        chunk = size_bytes // splits
        if comm_type != ALL_GATHER and chunk < self.num_npus:
            chunk, size_bytes = self.num_npus, splits * self.num_npus
        chunk = max(chunk, 1)
        return chunk, -(-size_bytes // chunk)

    def ring_of(self, comm_type: int, ranks: Sequence[int]) -> bool:
        """Whether a collective over `ranks` runs as one ring (a sub-group, or all NPUs
        on a network with one dimension of size > 1 and a ring implementation)."""
        if len(set(ranks)) != self.num_npus:
            return True
        active = [i for i, d in enumerate(self.dims) if d.size > 1]
        if len(active) != 1:
            return False
        return self.system.implementation(_NAMES[comm_type])[active[0]] in ("ring", "oneRing")

    def member_finish(
        self, comm_type: int, size_bytes: int, ranks: Sequence[int]
    ) -> Callable[[Sequence[int]], list[int]] | None:
        """Finish time of each member (in `ranks` order) given their arrival times, as
        ASTRA-sim runs a ring message by message (see `ring_members`); None where that
        model does not apply (several dimensions per chunk, non-ring algorithms)."""
        if comm_type not in _NAMES or len(ranks) <= 1:
            return None
        chunk, n_chunks = self.chunking(comm_type, size_bytes)
        group = list(ranks)
        slots = self.system.active_chunks_per_dimension
        if len(set(group)) == self.num_npus and len(self.world_plan(comm_type)) > 1:
            return self._phased_finish(comm_type, chunk) if n_chunks <= slots else None
        if not self.ring_of(comm_type, group):
            return None
        n = len(group)
        steps, reducing, divisor = ring_steps(comm_type, n)
        m = chunk // divisor
        edges = []
        for p in range(n):
            dim, a, b = self._dim_between(group[p - 1], group[p])
            edges.append(self.dims[dim].message_ns(m, self.dims[dim].hops(a, b)))
        d, r = self.system.endpoint_delay_ns, self._reduce_ns(m)

        def one_chunk(starts: list[int]) -> list[int]:
            return ring_finish(starts, steps, reducing, edges, d, r)

        def finish(arrivals: Sequence[int]) -> list[int]:
            return chunked_finish(arrivals, n_chunks, slots, one_chunk)

        return finish

    def _phased_finish(
        self, comm_type: int, chunk: int
    ) -> Callable[[Sequence[int]], list[int]] | None:
        """Per-member finish of an all-rank collective whose chunks cross several
        dimensions, every chunk in flight at once (chunks <= active chunks, so none waits
        for a slot and one chunk's timeline is every chunk's): each phase is a ring per
        line of the dimension, started when the member ended the previous phase."""
        phases: list[tuple[list[list[int]], int, int, list[int], int]] = []
        size, stride = chunk, [1]
        for dim in self.dims:
            stride.append(stride[-1] * dim.size)
        plan = self.world_plan(comm_type)
        for d, kind in plan:
            if self.system.implementation(_NAMES[kind])[d] not in ("ring", "oneRing"):
                return None
            # the all-gathers that end an all-reduce take the "last" queue of their
            # dimension, whose ring runs the other way round
            backwards = comm_type == ALL_REDUCE and kind == ALL_GATHER
            dim, n = self.dims[d], self.dims[d].size
            steps, reducing, divisor = ring_steps(kind, n)
            m = size // divisor
            lines = [
                [base + k * stride[d] for k in (range(n - 1, -1, -1) if backwards else range(n))]
                for base in range(self.num_npus)
                if (base // stride[d]) % n == 0
            ]
            edges = [dim.message_ns(m, dim.hops((k - 1) % n, k)) for k in range(n)]
            phases.append((lines, steps, reducing, edges, self._reduce_ns(m)))
            size = {ALL_GATHER: size * n, REDUCE_SCATTER: size // n}.get(kind, size)
        delay = self.system.endpoint_delay_ns

        def finish(arrivals: Sequence[int]) -> list[int]:
            t = list(arrivals)
            for lines, steps, reducing, edges, reduce_ns in phases:
                for line in lines:
                    ends = ring_finish(
                        [t[r] for r in line], steps, reducing, edges, delay, reduce_ns
                    )
                    for r, e in zip(line, ends, strict=True):
                        t[r] = e
            return t

        return finish

    def p2p_ns(self, size_bytes: int, src: int, dst: int) -> int:
        """One message on the first dimension where src and dst differ: N(S)."""
        if src == dst or size_bytes <= 0:
            return 0
        dim, a, b = self._dim_between(src, dst)
        return self.dims[dim].message_ns(size_bytes, self.dims[dim].hops(a, b))

    # -- phases --------------------------------------------------------------------------
    def world_plan(self, comm_type: int) -> list[tuple[int, int]]:
        """(dimension, collective) of each phase a chunk of an all-rank collective runs,
        in order (all-reduce with localBWAware: reduce-scatter up, all-reduce on the
        last dimension, all-gather back down)."""
        active = [i for i, d in enumerate(self.dims) if d.size > 1]
        if (
            comm_type == ALL_REDUCE
            and self.system.collective_optimization is CollectiveOptimization.LOCAL_BW_AWARE
        ):
            plan = [(i, REDUCE_SCATTER) for i in active[:-1]]
            plan += [(active[-1], ALL_REDUCE)] if active else []
            plan += [(i, ALL_GATHER) for i in reversed(active[:-1])]
            return plan
        order = list(reversed(active)) if comm_type == ALL_GATHER else active
        return [(i, comm_type) for i in order]

    def _world_phases(self, comm_type: int, chunk: int) -> list[_Phase]:
        phases = []
        size = chunk
        for dim, kind in self.world_plan(comm_type):
            duration, size = self._phase_ns(kind, size, dim)
            phases.append(_Phase(dim, duration))
        return phases

    def _phase_ns(self, kind: int, size: int, dim_index: int) -> tuple[int, int]:
        """(duration, size after the phase) of one algorithm on one dimension."""
        dim = self.dims[dim_index]
        impl = self.system.implementation(_NAMES[kind])[dim_index]
        hops = dim.hops(0, 1)
        if impl.rstrip("0123456789") in ("direct", "oneDirect"):
            return self._direct_ns(kind, size, dim)
        return _ring_ns(
            kind, size, dim.size, lambda m: dim.message_ns(m, hops), self.system, self._reduce_ns
        )

    def _direct_ns(self, kind: int, size: int, dim: _Dim) -> tuple[int, int]:
        """Direct: every peer at once; a step costs the farthest peer's message."""
        n, d = dim.size, self.system.endpoint_delay_ns
        msg = size if kind == ALL_GATHER else size // n
        far = max(dim.hops(0, k) for k in range(1, n))
        step = dim.message_ns(msg, far) + d
        reduce = self._reduce_ns(msg) * (n - 1)
        if kind == ALL_REDUCE:
            return d + 2 * step + reduce, size
        if kind == REDUCE_SCATTER:
            return d + step + reduce, size // n
        if kind == ALL_GATHER:
            return d + step, size * n
        return d + step, size

    def _group_ring_ns(self, comm_type: int, chunk: int, ranks: Sequence[int]) -> int:
        n = len(ranks)
        edges = [self._dim_between(ranks[i], ranks[(i + 1) % n]) for i in range(n)]

        def message(m: int) -> int:
            return max(self.dims[k].message_ns(m, self.dims[k].hops(a, b)) for k, a, b in edges)

        return _ring_ns(comm_type, chunk, n, message, self.system, self._reduce_ns)[0]

    def _reduce_ns(self, size_bytes: int) -> int:
        bw = self.system.local_mem_bw_gbps * 1e9
        return 3 * int(size_bytes / bw * 1e9)

    def _dim_between(self, src: int, dst: int) -> tuple[int, int, int]:
        """First dimension whose address digit differs, and the two digits."""
        for k, dim in enumerate(self.dims):
            a, b = src % dim.size, dst % dim.size
            if a != b:
                return k, a, b
            src //= dim.size
            dst //= dim.size
        raise SimulationError(f"ranks {src} and {dst} have the same network address")


def _ring_ns(
    kind: int,
    size: int,
    n: int,
    message: Callable[[int], int],
    system: AstraSystemConfig,
    reduce_ns: Callable[[int], int],
) -> tuple[int, int]:
    """ASTRA-sim's ring per chunk: (duration, size after the phase)."""
    d = system.endpoint_delay_ns
    if kind == ALL_REDUCE:
        m = size // n
        return d + 2 * (n - 1) * (message(m) + d) + (n - 1) * reduce_ns(m), size
    if kind == REDUCE_SCATTER:
        m = size // n
        return d + (n - 1) * (message(m) + d + reduce_ns(m)), m
    if kind == ALL_GATHER:
        return d + (n - 1) * (message(size) + d), size * n
    m = size // n  # all-to-all on a ring: n(n-1)/2 neighbour messages
    return d + (n * (n - 1) // 2) * (message(m) + d), size


def _schedule(chunks: list[list[_Phase]], slots: int) -> int:
    """Finish time of chunks whose phases queue for their dimension (`slots` at once, FIFO)."""
    free: dict[int, list[int]] = {}
    ready = [(0, i, 0) for i in range(len(chunks))]  # (time ready, chunk, phase index)
    heapq.heapify(ready)
    end = 0
    while ready:
        t, i, k = heapq.heappop(ready)
        phase = chunks[i][k]
        pool = free.setdefault(phase.queue, [0] * slots)
        start = max(t, heapq.heappop(pool))
        finish = start + phase.duration_ns
        heapq.heappush(pool, finish)
        if k + 1 < len(chunks[i]):
            heapq.heappush(ready, (finish, i, k + 1))
        end = max(end, finish)
    return end
