"""Collective timing as ASTRA-sim's congestion-aware analytical backend computes it.

That backend takes one-dimensional networks only. A collective is cut into chunks as in
the congestion-unaware backend (`AstraPricer.chunking`) and runs as a ring, but each
message is forwarded store-and-forward over real links that carry one message at a time
(`ring_links`): on a Switch a message crosses two links, each costing `int(L + S/B)`,
and the chunks in flight on a rank queue for its links. Collectives are always priced
message by message, so members that arrive at different times finish at their own times.
Only ring implementations are modelled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lumos.converters.astra_sim.config import AstraNetworkConfig, AstraSystemConfig, AstraTopology
from lumos.errors import ConfigError, SimulationError
from lumos.simulator.network.astra import _NAMES, AstraPricer
from lumos.simulator.network.ring_links import RingPlan, Route, run_ring
from lumos.simulator.network.ring_members import ring_steps


class CongestionAwarePricer(AstraPricer):
    """AstraPricer for the congestion-aware binary (1-D networks, ring collectives)."""

    def __init__(self, system: AstraSystemConfig, network: AstraNetworkConfig) -> None:
        super().__init__(system, network)
        if network.num_dims != 1:
            raise ConfigError(
                f"the congestion-aware backend accepts one-dimensional networks only; this "
                f"one has {network.num_dims} (export with --astra-backend congestion-aware "
                "writes a 1-D network)"
            )
        impls = {system.implementation(name)[0] for name in _NAMES.values()}
        if not impls <= {"ring", "oneRing"}:
            raise ConfigError(
                f"lumos models the congestion-aware backend for ring collectives only, not "
                f"{sorted(impls - {'ring', 'oneRing'})}"
            )
        self._cache: dict[tuple[int, int, tuple[int, ...]], int] = {}

    def collective_ns(self, comm_type: int, size_bytes: int, ranks: Sequence[int]) -> int:
        """Time of one collective whose members arrive together."""
        if comm_type not in _NAMES:
            raise SimulationError(
                f"ASTRA-sim simulates all-reduce, all-gather, reduce-scatter and all-to-all only "
                f"(comm_type {comm_type})"
            )
        key = (comm_type, size_bytes, tuple(ranks))
        if key not in self._cache:
            finish = self.member_finish(comm_type, size_bytes, ranks)
            self._cache[key] = max(finish([0] * len(ranks))) if finish else 0
        return self._cache[key]

    def member_finish(
        self, comm_type: int, size_bytes: int, ranks: Sequence[int]
    ) -> Callable[[Sequence[int]], list[int]] | None:
        """Finish of each member given its arrival time, message by message on links."""
        if comm_type not in _NAMES or len(ranks) <= 1:
            return None
        chunk, n_chunks = self.chunking(comm_type, size_bytes)
        steps, reducing, divisor = ring_steps(comm_type, len(ranks))
        message = max(chunk // divisor, 1)
        plan = RingPlan(
            ring=list(ranks),
            steps=steps,
            reducing=reducing,
            message_bytes=message,
            chunks=n_chunks,
            slots=self.system.active_chunks_per_dimension,
            delay_ns=self.system.endpoint_delay_ns,
            reduce_ns=self._reduce_ns(chunk // divisor),
        )
        dim = self.dims[0]

        def link_time(size: int) -> tuple[int, int]:
            return int(size / dim.bytes_per_ns), int(dim.latency_ns + size / dim.bytes_per_ns)

        def finish(arrivals: Sequence[int]) -> list[int]:
            return run_ring(plan, arrivals, self.route, link_time)

        return finish

    def p2p_ns(self, size_bytes: int, src: int, dst: int) -> int:
        """One message over its route with free links: `int(L + S/B)` per link."""
        if src == dst or size_bytes <= 0:
            return 0
        dim = self.dims[0]
        hop = int(dim.latency_ns + size_bytes / dim.bytes_per_ns)
        return hop * (len(self.route(src, dst)) - 1)

    def route(self, src: int, dst: int) -> Route:
        """Devices a message visits, as the backend routes it (switch = device N)."""
        dim = self.dims[0]
        if dim.topology is AstraTopology.SWITCH:
            return [src, dim.size, dst]
        if dim.topology is AstraTopology.FULLY_CONNECTED:
            return [src, dst]
        clockwise = (dst - src) % dim.size
        step = -1 if dim.size - clockwise < clockwise else 1
        path = [src]
        while path[-1] != dst:
            path.append((path[-1] + step) % dim.size)
        return path
