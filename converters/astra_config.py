"""Typed read and write of ASTRA-sim 2.x input configs.

Four files describe an ASTRA-sim run besides the workload: the system JSON (collective
algorithms, chunking, endpoint delay, local memory bandwidth), the analytical network YAML
(one entry per dimension: topology, NPU count, bandwidth in GB/s with 1 GB = 2^30 bytes,
latency in ns), the remote-memory JSON and the communicator-group JSON. Each is loaded into
a frozen record here, checked the way ASTRA-sim would use it, and written back with every
key spelled out so no default is left to chance. ASTRA-sim silently ignores unknown system
keys; we refuse them with a "did you mean" and the file name.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from lumos.errors import ConfigError


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
            "local-mem-bw": _plain_number(self.local_mem_bw_gbps),
            "all-reduce-implementation": list(self.all_reduce_implementation),
            "all-gather-implementation": list(self.all_gather_implementation),
            "reduce-scatter-implementation": list(self.reduce_scatter_implementation),
            "all-to-all-implementation": list(self.all_to_all_implementation),
            "roofline-enabled": 1 if self.roofline_enabled else 0,
            "peak-perf": _plain_number(self.peak_perf_tflops),
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
            "bandwidth": [_plain_number(b) for b in self.bandwidth_gbps],
            "latency": [_plain_number(v) for v in self.latency_ns],
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


def _plain_number(value: float) -> int | float:
    """Write 50.0 as 50 so files look like ASTRA-sim's own."""
    return int(value) if float(value).is_integer() else float(value)


def _unknown_key_error(source: str, key: str, known: Sequence[str], what: str) -> ConfigError:
    close = difflib.get_close_matches(key, list(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
    return ConfigError(f"{source}: unknown {what} key {key!r}{hint}")


def _enum(source: str, key: str, value: Any, enum: type[Enum]) -> Any:
    for member in enum:
        if member.value == value:
            return member
    choices = [str(m.value) for m in enum]
    close = difflib.get_close_matches(str(value), choices, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(f"{source}: {key} = {value!r} is not one of {choices}{hint}")


def _int(source: str, key: str, value: Any, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ConfigError(f"{source}: {key} must be an integer, got {value!r}")
    if int(value) < minimum:
        raise ConfigError(f"{source}: {key} must be >= {minimum}, got {value!r}")
    return int(value)


def _number(source: str, key: str, value: Any, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{source}: {key} must be a number, got {value!r}")
    if positive and value <= 0:
        raise ConfigError(f"{source}: {key} must be > 0, got {value!r}")
    if value < 0:
        raise ConfigError(f"{source}: {key} must be >= 0, got {value!r}")
    return float(value)


def _implementations(source: str, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{source}: {key} must be a non-empty list, one entry per dimension")
    for name in value:
        base = str(name).rstrip("0123456789")
        if base not in IMPLEMENTATIONS or (base != name and base not in ("direct", "oneDirect")):
            close = difflib.get_close_matches(str(name), sorted(IMPLEMENTATIONS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{source}: {key} has unknown implementation {name!r}{hint}")
    return tuple(str(v) for v in value)


def system_from_dict(data: Mapping[str, Any], source: str = "<system>") -> AstraSystemConfig:
    """Build an AstraSystemConfig from parsed JSON. Raises ConfigError naming `source`."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: system config must be a JSON object")
    known = _REQUIRED_SYSTEM_KEYS + _OPTIONAL_SYSTEM_KEYS + _PASSTHROUGH_SYSTEM_KEYS
    for key in data:
        if key not in known:
            raise _unknown_key_error(source, key, known, "system")
    missing = [k for k in _REQUIRED_SYSTEM_KEYS if k not in data]
    if missing:
        raise ConfigError(f"{source}: missing system key(s) {', '.join(missing)}")
    impls = {
        k: _implementations(source, k, data[k])
        for k in _REQUIRED_SYSTEM_KEYS
        if k.endswith("implementation")
    }
    dims = {len(v) for v in impls.values()}
    if len(dims) != 1:
        raise ConfigError(f"{source}: the four *-implementation lists must have the same length")
    roofline = bool(data.get("roofline-enabled", 0))
    peak = _number(source, "peak-perf", data.get("peak-perf", 0), positive=roofline)
    return AstraSystemConfig(
        scheduling_policy=_enum(
            source, "scheduling-policy", data["scheduling-policy"], SchedulingPolicy
        ),
        endpoint_delay_ns=_int(source, "endpoint-delay", data["endpoint-delay"], minimum=0),
        active_chunks_per_dimension=_int(
            source, "active-chunks-per-dimension", data["active-chunks-per-dimension"], minimum=1
        ),
        preferred_dataset_splits=_int(
            source, "preferred-dataset-splits", data["preferred-dataset-splits"], minimum=1
        ),
        collective_optimization=_enum(
            source,
            "collective-optimization",
            data["collective-optimization"],
            CollectiveOptimization,
        ),
        local_mem_bw_gbps=_number(source, "local-mem-bw", data["local-mem-bw"], positive=True),
        all_reduce_implementation=impls["all-reduce-implementation"],
        all_gather_implementation=impls["all-gather-implementation"],
        reduce_scatter_implementation=impls["reduce-scatter-implementation"],
        all_to_all_implementation=impls["all-to-all-implementation"],
        roofline_enabled=roofline,
        peak_perf_tflops=peak,
        passthrough=tuple((k, data[k]) for k in _PASSTHROUGH_SYSTEM_KEYS if k in data),
    )


def network_from_dict(data: Mapping[str, Any], source: str = "<network>") -> AstraNetworkConfig:
    """Build an AstraNetworkConfig from parsed YAML. Raises ConfigError naming `source`."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: network config must be a YAML mapping")
    for key in data:
        if key not in _NETWORK_KEYS:
            raise _unknown_key_error(source, key, _NETWORK_KEYS, "network")
    missing = [k for k in _NETWORK_KEYS if k not in data]
    if missing:
        raise ConfigError(f"{source}: missing network key(s) {', '.join(missing)}")
    lists = {}
    for key in _NETWORK_KEYS:
        value = data[key]
        lists[key] = value if isinstance(value, list) else [value]
    if len({len(v) for v in lists.values()}) != 1 or not lists["topology"]:
        raise ConfigError(
            f"{source}: topology, npus_count, bandwidth, latency need one entry per dimension"
        )
    topology = tuple(_enum(source, "topology", t, AstraTopology) for t in lists["topology"])
    counts = tuple(_int(source, "npus_count", n, minimum=1) for n in lists["npus_count"])
    for topo, n in zip(topology, counts, strict=True):
        if topo is AstraTopology.RING and n < 2:
            raise ConfigError(f"{source}: a Ring dimension needs npus_count >= 2, got {n}")
    return AstraNetworkConfig(
        topology=topology,
        npus_count=counts,
        bandwidth_gbps=tuple(
            _number(source, "bandwidth", b, positive=True) for b in lists["bandwidth"]
        ),
        latency_ns=tuple(_number(source, "latency", v, positive=False) for v in lists["latency"]),
    )


def memory_from_dict(data: Mapping[str, Any], source: str = "<memory>") -> AstraMemoryConfig:
    """Build an AstraMemoryConfig from parsed JSON. Raises ConfigError naming `source`."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: remote-memory config must be a JSON object")
    for key in data:
        if key not in _MEMORY_KEYS:
            raise _unknown_key_error(source, key, _MEMORY_KEYS, "remote-memory")
    if "memory-type" not in data:
        raise ConfigError(f"{source}: missing remote-memory key memory-type")
    return AstraMemoryConfig(
        memory_type=_enum(source, "memory-type", data["memory-type"], MemoryType),
        passthrough=tuple((k, data[k]) for k in _MEMORY_KEYS[1:] if k in data),
    )


def comm_groups_from_dict(data: Mapping[str, Any], source: str = "<comm_group>") -> AstraCommGroups:
    """Build AstraCommGroups from parsed JSON. Raises ConfigError naming `source`."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: comm-group config must be a JSON object")
    groups = []
    for key, members in data.items():
        try:
            gid = int(key)
        except ValueError:
            raise ConfigError(f"{source}: group id {key!r} is not an integer") from None
        if gid < 1:
            raise ConfigError(f"{source}: group id {gid} is reserved (ids start at 1)")
        if not isinstance(members, list) or not members:
            raise ConfigError(f"{source}: group {gid} must list its member ranks")
        ranks = tuple(_int(source, f"group {gid} rank", r, minimum=0) for r in members)
        if len(set(ranks)) != len(ranks):
            raise ConfigError(f"{source}: group {gid} lists a rank twice: {list(ranks)}")
        groups.append((gid, ranks))
    return AstraCommGroups(groups=tuple(sorted(groups)))


def _read_json(path: str | Path) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON: {exc}") from exc


def load_astra_system(path: str | Path) -> AstraSystemConfig:
    """Read an ASTRA-sim system JSON. Raises ConfigError naming the file."""
    return system_from_dict(_read_json(path), str(path))


def load_astra_network(path: str | Path) -> AstraNetworkConfig:
    """Read an ASTRA-sim analytical network YAML. Raises ConfigError naming the file."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    return network_from_dict(data, str(path))


def load_astra_memory(path: str | Path) -> AstraMemoryConfig:
    """Read an ASTRA-sim remote-memory JSON. Raises ConfigError naming the file."""
    return memory_from_dict(_read_json(path), str(path))


def load_astra_comm_groups(path: str | Path) -> AstraCommGroups:
    """Read an ASTRA-sim communicator-group JSON. Raises ConfigError naming the file."""
    return comm_groups_from_dict(_read_json(path), str(path))


def dump_astra_system(config: AstraSystemConfig, path: str | Path) -> None:
    """Write the system JSON with every key."""
    Path(path).write_text(json.dumps(config.to_dict(), indent=4) + "\n")


def dump_astra_network(config: AstraNetworkConfig, path: str | Path) -> None:
    """Write the analytical network YAML, one flow-style list per key like ASTRA-sim's examples."""
    lines = []
    for key, values in config.to_dict().items():
        lines.append(f"{key}: [ {', '.join(str(v) for v in values)} ]")
    Path(path).write_text("\n".join(lines) + "\n")


def dump_astra_memory(config: AstraMemoryConfig, path: str | Path) -> None:
    """Write the remote-memory JSON."""
    Path(path).write_text(json.dumps(config.to_dict(), indent=4) + "\n")


def dump_astra_comm_groups(config: AstraCommGroups, path: str | Path) -> None:
    """Write the communicator-group JSON."""
    Path(path).write_text(json.dumps(config.to_dict(), indent=4) + "\n")
