"""Reading and writing ASTRA-sim's config files: system JSON, network YAML, memory, groups.

Each file is loaded into a frozen record of `config`, checked the way ASTRA-sim would use
it, and written back with every key spelled out so no default is left to chance. ASTRA-sim
silently ignores unknown system keys; we refuse them with a "did you mean" and the file name.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

from lumos.converters.astra_sim.config import (
    _MEMORY_KEYS,
    _NETWORK_KEYS,
    _OPTIONAL_SYSTEM_KEYS,
    _PASSTHROUGH_SYSTEM_KEYS,
    _REQUIRED_SYSTEM_KEYS,
    IMPLEMENTATIONS,
    AstraCommGroups,
    AstraMemoryConfig,
    AstraNetworkConfig,
    AstraSystemConfig,
    AstraTopology,
    CollectiveOptimization,
    MemoryType,
    SchedulingPolicy,
)
from lumos.errors import ConfigError
from lumos.hwconfigs.fields import LATENCY_NS, config_bytes, load_yaml, regular_file, within
from lumos.limits import MAX_CHUNKS, MAX_RANKS


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


def _finite(value: Any) -> bool:
    """A real number: not bool, NaN or infinite (Python's JSON reader accepts NaN)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _int(source: str, key: str, value: Any, *, minimum: int) -> int:
    if not _finite(value) or value != int(value):
        raise ConfigError(f"{source}: {key} must be an integer, got {value!r}")
    if int(value) < minimum:
        raise ConfigError(f"{source}: {key} must be >= {minimum}, got {value!r}")
    return int(value)


def _number(source: str, key: str, value: Any, *, positive: bool) -> float:
    if not _finite(value):
        raise ConfigError(f"{source}: {key} must be a finite number, got {value!r}")
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
        active_chunks_per_dimension=MAX_CHUNKS.check(
            _int(
                source,
                "active-chunks-per-dimension",
                data["active-chunks-per-dimension"],
                minimum=1,
            ),
            f"{source}: active-chunks-per-dimension",
        ),
        preferred_dataset_splits=MAX_CHUNKS.check(
            _int(source, "preferred-dataset-splits", data["preferred-dataset-splits"], minimum=1),
            f"{source}: preferred-dataset-splits",
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


#: a link's GB/s per direction: 0.1 (under 1 Gb/s Ethernet) to 100,000 (over 100x an
#: NVLink 5 GPU's 900 GB/s); outside it the figure was written in other units (bit/s,
#: B/s, TB/s). Latencies share the hardware configs' band (0, or 1 ns to 1 s).
_BANDWIDTH_GBPS = within(0.1, 1e5, "GB/s per link")


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
    MAX_RANKS.check(math.prod(counts), f"{source}: npus (product of npus_count)")
    for topo, n in zip(topology, counts, strict=True):
        if topo is AstraTopology.RING and n < 2:
            raise ConfigError(f"{source}: a Ring dimension needs npus_count >= 2, got {n}")
    return AstraNetworkConfig(
        topology=topology,
        npus_count=counts,
        bandwidth_gbps=tuple(
            _BANDWIDTH_GBPS(_number(source, "bandwidth", b, positive=True), f"{source}: bandwidth")
            for b in lists["bandwidth"]
        ),
        latency_ns=tuple(
            LATENCY_NS(_number(source, "latency", v, positive=False), f"{source}: latency")
            for v in lists["latency"]
        ),
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


def _config_text(path: str | Path, what: str, *, capped: bool = True) -> str:
    """The text of an ASTRA-sim config file after lumos' config checks: a regular file (a
    FIFO would block the read forever), UTF-8, and — `capped` — at most
    `LUMOS_MAX_CONFIG_BYTES`. Communicator groups are not capped by size: one lists every
    rank of a job (its group sizes are checked against `LUMOS_MAX_RANKS` instead)."""
    p = Path(path)
    if capped:
        raw = config_bytes(p, what)
    else:
        regular_file(p, what)
        try:
            raw = p.read_bytes()
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _read_json(path: str | Path, what: str, *, capped: bool = True) -> Any:
    text = _config_text(path, what, capped=capped)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"{path}: invalid JSON: nested too deeply") from None


def load_astra_system(path: str | Path) -> AstraSystemConfig:
    """Read an ASTRA-sim system JSON. Raises ConfigError naming the file."""
    return system_from_dict(_read_json(path, "ASTRA-sim system JSON"), str(path))


def load_astra_network(path: str | Path) -> AstraNetworkConfig:
    """Read an ASTRA-sim analytical network YAML. Raises ConfigError naming the file."""
    import yaml  # here: `simulate` imports this module for its JSON readers too

    text = _config_text(path, "ASTRA-sim network YAML")
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None
    return network_from_dict(data, str(path))


def load_astra_memory(path: str | Path) -> AstraMemoryConfig:
    """Read an ASTRA-sim remote-memory JSON. Raises ConfigError naming the file."""
    return memory_from_dict(_read_json(path, "ASTRA-sim remote-memory JSON"), str(path))


def load_astra_comm_groups(path: str | Path) -> AstraCommGroups:
    """Read an ASTRA-sim communicator-group JSON. Raises ConfigError naming the file."""
    return comm_groups_from_dict(
        _read_json(path, "ASTRA-sim communicator-group JSON", capped=False), str(path)
    )


def dump_astra_system(config: AstraSystemConfig, path: str | Path) -> None:
    """Write the system JSON with every key."""
    Path(path).write_text(json.dumps(config.to_dict(), indent=4) + "\n")


def dump_astra_network(config: AstraNetworkConfig, path: str | Path) -> None:
    """Write the analytical network YAML, one flow-style list per key like ASTRA-sim's examples."""
    lines = []
    for key, values in config.to_dict().items():
        lines.append(f"{key}: [ {', '.join(_yaml_number(v) for v in values)} ]")
    Path(path).write_text("\n".join(lines) + "\n")


def _yaml_number(value: Any) -> str:
    """A number as YAML 1.1 reads it back: `1e-05` is text to PyYAML, `1.0e-05` a float."""
    text = str(value)
    if isinstance(value, float) and "e" in text and "." not in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent if exponent[0] in '+-' else '+' + exponent}"
    return text


def dump_astra_memory(config: AstraMemoryConfig, path: str | Path) -> None:
    """Write the remote-memory JSON."""
    Path(path).write_text(json.dumps(config.to_dict(), indent=4) + "\n")


def dump_astra_comm_groups(config: AstraCommGroups, path: str | Path) -> None:
    """Write the communicator-group JSON."""
    Path(path).write_text(json.dumps(config.to_dict(), indent=4) + "\n")


def load_pg_ranks(path: str | Path) -> dict[str, list[int]]:
    """A comm-group JSON as the simulator takes it: `{"<pg_name or id>": [ranks], ...}`.

    Raises ConfigError naming the file if it is not an object of non-negative rank lists.
    """
    data = _read_json(path, "communicator-group JSON", capped=False)
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected an object {{group id: [ranks]}}, got a {type(data).__name__}"
        )
    for key, ranks in data.items():
        if not (isinstance(ranks, list) and all(type(r) is int and r >= 0 for r in ranks)):
            raise ConfigError(f"{path}: group {key!r} must be a list of ranks, got {ranks!r:.60}")
        MAX_RANKS.check(len(ranks), f"{path}: group {key!r} size")
    return data
