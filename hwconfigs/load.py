"""Load hardware YAML into frozen records, refusing anything unknown.

Shipped files live next to this module: `gpus/`, `nodes/`, `fabrics/`, `systems/`. A system
names its node and fabric, a node names its GPU; each reference is a shipped name
(`h100_sxm`), a path relative to the referring file, or an inline mapping. `load_system`
takes a short name (`h100`, `a100`, `h100-roce`) or a path to a user's YAML. Every error is
a ConfigError naming the file and key, with a "did you mean" for misspelt keys.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from lumos.errors import ConfigError
from lumos.hwconfigs.fields import (
    LATENCY_NS,
    Parser,
    config_file,
)
from lumos.hwconfigs.fields import (
    REQUIRED as _REQUIRED,
)
from lumos.hwconfigs.fields import (
    choice as _choice,
)
from lumos.hwconfigs.fields import (
    count as _count,
)
from lumos.hwconfigs.fields import (
    efficiency as _efficiency,
)
from lumos.hwconfigs.fields import (
    fields as _fields,
)
from lumos.hwconfigs.fields import (
    flag as _flag,
)
from lumos.hwconfigs.fields import (
    link as _link,
)
from lumos.hwconfigs.fields import (
    optional_link as _optional_link,
)
from lumos.hwconfigs.fields import (
    positive as _positive,
)
from lumos.hwconfigs.fields import (
    read_yaml as _read_yaml,
)
from lumos.hwconfigs.fields import (
    text as _text,
)
from lumos.hwconfigs.fields import (
    within as _within,
)
from lumos.hwconfigs.nic_units import warn_nic_units
from lumos.hwconfigs.schema import (
    CollectiveChoice,
    EfficiencyPoint,
    FabricSpec,
    FabricTopology,
    GpuSpec,
    LinkSpec,
    NodeSpec,
    SystemSpec,
    Transport,
)
from lumos.limits import MAX_RANKS

ROOT = Path(__file__).resolve().parent
KINDS = ("gpus", "nodes", "fabrics", "systems")
COLLECTIVE_ALGORITHMS = ("auto", "ring", "tree", "nvls", "direct", "hierarchical")


def shipped_names(kind: str = "systems") -> list[str]:
    """Names of the shipped configs of one kind (`gpus`, `nodes`, `fabrics`, `systems`)."""
    return sorted(p.stem for p in (ROOT / kind).glob("*.yaml"))


def shipped_path(kind: str, name: str) -> Path:
    """Path of a shipped config. Raises ConfigError with the closest names if absent."""
    path = ROOT / kind / f"{name}.yaml"
    plain = name and not name.startswith(".") and not any(c in name for c in "/\\\0")
    if not plain or not path.is_file():
        names = shipped_names(kind)
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"no shipped {kind[:-1]} config {name!r} (have: {', '.join(names)}){hint}"
        )
    return path


def _ref(kind: str, base: Path, build: Callable[[Mapping[str, Any], str, Path], Any]) -> Parser:
    """Parser of a reference: shipped name, relative path, or inline mapping."""

    def parse(value: Any, where: str) -> Any:
        if isinstance(value, Mapping):
            return build(value, where, base)
        if not isinstance(value, str):
            raise ConfigError(f"{where} must name a shipped {kind[:-1]} or a YAML path")
        path = base / value if value.endswith((".yaml", ".yml")) else shipped_path(kind, value)
        return build(_read_yaml(path), str(path), path.parent)

    return parse


#: Bands a GPU's figures fall in, so one given in other units is refused (`within`).
#: Shipped GPUs (hwconfigs/gpus/): dense peaks 7.8 (V100 FP64) to 1,978.9 TFLOP/s (H100
#: FP8); NVIDIA's B200 datasheet: 4,500 dense FP8 TFLOP/s, 8 TB/s and 180 GB of HBM3e;
#: HBM 900 GB/s (V100) to 4,800 (H200), 32 to 141 GB. The bands leave a decade or more
#: each side and refuse FLOP/s or PFLOP/s, TB/s or MB/s, bytes or TB.
_TENSOR_TFLOPS = _within(1.0, 1e5, "dense TFLOP/s")
_VECTOR_TFLOPS = _within(0.01, 1e5, "dense TFLOP/s")  # FP32/FP64: an L4 has 0.49 FP64
_HBM_GBPS = _within(100.0, 1e5, "GB/s")
_HBM_GB = _within(1.0, 1e4, "GB")


def _optional_tensor_tflops(value: Any, where: str) -> float | None:
    return None if value is None else _TENSOR_TFLOPS(value, where)


def _gpu(data: Mapping[str, Any], where: str, base: Path) -> GpuSpec:
    table = {
        "name": (_text, _REQUIRED),
        "description": (_text, ""),
        "peak_bf16_tflops": (_TENSOR_TFLOPS, _REQUIRED),
        "peak_fp16_tflops": (_TENSOR_TFLOPS, _REQUIRED),
        "peak_tf32_tflops": (_TENSOR_TFLOPS, _REQUIRED),
        "peak_fp32_tflops": (_VECTOR_TFLOPS, _REQUIRED),
        "peak_fp64_tflops": (_VECTOR_TFLOPS, _REQUIRED),
        "peak_fp8_tflops": (_optional_tensor_tflops, None),
        "hbm_bandwidth_gbps": (_HBM_GBPS, _REQUIRED),
        "hbm_capacity_gb": (_HBM_GB, _REQUIRED),
    }
    return GpuSpec(**_fields(data, table, where))


def _node(data: Mapping[str, Any], where: str, base: Path) -> NodeSpec:
    table = {
        "name": (_text, _REQUIRED),
        "description": (_text, ""),
        "gpu": (_ref("gpus", base, _gpu), _REQUIRED),
        "gpus_per_node": (_count, _REQUIRED),
        "nvlink_generation": (_count, _REQUIRED),
        "nvlink": (_link, _REQUIRED),
        "nvswitch": (_flag, True),
        "nvls": (_optional_link, None),
        "nics_per_node": (_count, _REQUIRED),
        "collective_launch_ns": (LATENCY_NS, 0.0),
    }
    fields = _fields(data, table, where)
    if fields["nvls"] is not None and not fields["nvswitch"]:
        raise ConfigError(f"{where}: nvls needs nvswitch: true")
    return NodeSpec(**fields)


def _fabric(data: Mapping[str, Any], where: str, base: Path) -> FabricSpec:
    table = {
        "name": (_text, _REQUIRED),
        "description": (_text, ""),
        "transport": (_choice(tuple(t.value for t in Transport)), _REQUIRED),
        "topology": (_choice(tuple(t.value for t in FabricTopology)), _REQUIRED),
        # Gb/s as marketed: the shipped fabrics 100-400, ConnectX-8 800 (NVIDIA)
        "nic_line_rate_gbit_per_s": (_within(1.0, 1e5, "Gb/s"), _REQUIRED),
        "nic_latency_ns": (LATENCY_NS, _REQUIRED),
        "nic_efficiency": (_efficiency, (EfficiencyPoint(1, 1.0),)),
        "oversubscription": (_positive, 1.0),
        "nodes_per_leaf": (_count, 32),
    }
    f = _fields(data, table, where)
    if f["oversubscription"] < 1:
        raise ConfigError(f"{where}: oversubscription is a ratio >= 1 (1 = non-blocking)")
    nic = LinkSpec(f["nic_line_rate_gbit_per_s"] / 8.0, f["nic_latency_ns"], f["nic_efficiency"])
    return FabricSpec(
        name=f["name"],
        description=f["description"],
        transport=Transport(f["transport"]),
        topology=FabricTopology(f["topology"]),
        nic_line_rate_gbit_per_s=f["nic_line_rate_gbit_per_s"],
        nic=nic,
        oversubscription=f["oversubscription"],
        nodes_per_leaf=f["nodes_per_leaf"],
    )


def _collectives(value: Any, where: str) -> CollectiveChoice:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a mapping of collective -> algorithm")
    algo = (_choice(COLLECTIVE_ALGORITHMS), "auto")
    table = {k: algo for k in ("all_reduce", "all_gather", "reduce_scatter", "broadcast")}
    table["all_to_all"] = (_choice(COLLECTIVE_ALGORITHMS), "direct")
    return CollectiveChoice(**_fields(value, table, where))


def _system(data: Mapping[str, Any], where: str, base: Path) -> SystemSpec:
    table = {
        "name": (_text, _REQUIRED),
        "description": (_text, ""),
        "node": (_ref("nodes", base, _node), _REQUIRED),
        "fabric": (_ref("fabrics", base, _fabric), _REQUIRED),
        "num_nodes": (_count, 1),
        "collectives": (_collectives, CollectiveChoice()),
    }
    spec = SystemSpec(**_fields(data, table, where), source=where)
    warn_nic_units(spec.node, spec.fabric, where)
    return spec


def load_gpu(name_or_path: str | Path) -> GpuSpec:
    """A GPU by shipped name (`h100_sxm`) or YAML path."""
    path = _resolve("gpus", name_or_path)
    return _gpu(_read_yaml(path), str(path), path.parent)


def load_node(name_or_path: str | Path) -> NodeSpec:
    """A node by shipped name (`hgx_h100`) or YAML path."""
    path = _resolve("nodes", name_or_path)
    return _node(_read_yaml(path), str(path), path.parent)


def load_fabric(name_or_path: str | Path) -> FabricSpec:
    """A fabric by shipped name (`ndr_rail_fat_tree`) or YAML path."""
    path = _resolve("fabrics", name_or_path)
    return _fabric(_read_yaml(path), str(path), path.parent)


def load_system(name_or_path: str | Path, *, num_nodes: int | None = None) -> SystemSpec:
    """A whole system by short name (`h100`, `a100`, `h100-roce`) or YAML path.

    `num_nodes` overrides the file's node count (a trace of 16 ranks on 8-GPU nodes needs 2).
    Raises ConfigError naming the file and key on any problem, ResourceLimitError past
    `LUMOS_MAX_RANKS` GPUs.
    """
    path = _resolve("systems", name_or_path)
    system = _system(_read_yaml(path), str(path), path.parent)
    if num_nodes is not None:
        system = replace(system, num_nodes=_count(num_nodes, "num_nodes"))
    MAX_RANKS.check(
        system.num_nodes * system.node.gpus_per_node, f"{path}: GPUs (num_nodes x gpus)"
    )
    return system


def _resolve(kind: str, name_or_path: str | Path) -> Path:
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or text.endswith((".yaml", ".yml")) or "/" in text:
        return config_file(Path(name_or_path), f"{kind[:-1]} config")
    return shipped_path(kind, text)
