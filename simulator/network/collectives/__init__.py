"""Collective algorithms, one module each, chosen by name from the hardware config.

Every module exposes `supports(kind, shape, topology)` and `time_ns(kind, size_bytes, shape,
topology)`; `ALGORITHMS` maps the config names (`ring`, `tree`, `nvls`, `direct`,
`hierarchical`) to them. Sizes have ASTRA-sim's meaning: all-gather and gather take the
per-rank shard, every other collective the whole per-rank buffer.
"""

from __future__ import annotations

from enum import Enum
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from lumos.errors import SimulationError

if TYPE_CHECKING:
    from lumos.simulator.network.nccl import GroupShape, Topology


class Kind(Enum):
    """Chakra CollectiveCommType values."""

    ALL_REDUCE = 0
    REDUCE = 1
    ALL_GATHER = 2
    GATHER = 3
    SCATTER = 4
    BROADCAST = 5
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7
    REDUCE_SCATTER_BLOCK = 8
    BARRIER = 9

    @property
    def config_key(self) -> str | None:
        """Field of CollectiveChoice that names this collective's algorithm."""
        return _CONFIG_KEYS.get(self)


_CONFIG_KEYS = {
    Kind.ALL_REDUCE: "all_reduce",
    Kind.ALL_GATHER: "all_gather",
    Kind.REDUCE_SCATTER: "reduce_scatter",
    Kind.REDUCE_SCATTER_BLOCK: "reduce_scatter",
    Kind.ALL_TO_ALL: "all_to_all",
    Kind.BROADCAST: "broadcast",
}


def kind_of(comm_type: int) -> Kind:
    """Kind of a Chakra comm_type int. Raises SimulationError for an unknown value."""
    try:
        return Kind(comm_type)
    except ValueError:
        raise SimulationError(f"unknown collective comm_type {comm_type}") from None


class Algorithm(Protocol):
    def supports(self, kind: Kind, shape: GroupShape, topology: Topology) -> bool: ...

    def time_ns(
        self, kind: Kind, size_bytes: int, shape: GroupShape, topology: Topology
    ) -> float: ...


def _load() -> dict[str, ModuleType]:
    from lumos.simulator.network.collectives import direct, hierarchical, nvls, ring, tree

    return {
        "ring": ring,
        "tree": tree,
        "nvls": nvls,
        "direct": direct,
        "hierarchical": hierarchical,
    }


ALGORITHMS: dict[str, Algorithm] = _load()  # type: ignore[assignment]
