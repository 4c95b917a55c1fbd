"""Typed field parsers of hardware YAML: numbers, counts, links, curves; errors name file and key."""

from __future__ import annotations

import difflib
import math
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson
import yaml

from lumos.errors import ConfigError
from lumos.hwconfigs.schema import EfficiencyPoint, LinkSpec
from lumos.limits import MAX_CONFIG_BYTES

REQUIRED = object()
Parser = Callable[[Any, str], Any]


class _StrictLoader(yaml.SafeLoader):
    """yaml's safe loader (no Python tags) that refuses a key given twice in one mapping
    (plain PyYAML keeps the last one silently: `num_nodes: 64` ... `num_nodes: 4`) and a
    document whose aliases expand it past `MAX_YAML_VALUES` (checked on the composed
    nodes, before anything is built or printed)."""

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        if node is not None and _expanded_size(node) > MAX_YAML_VALUES:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"it holds more than {MAX_YAML_VALUES:,} values with its aliases expanded "
                "(a config holds hundreds; an alias bomb, 'billion laughs', billions)",
                node.start_mark,
            )
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            key = key_node.value
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


#: values a YAML document may expand to through its aliases (shipped configs: < 1,000)
MAX_YAML_VALUES = 100_000


def _expanded_size(root: yaml.Node) -> int:
    """Values `root` stands for once every alias is expanded (each shared node counted
    at each use), without expanding it. Raises yaml.YAMLError for an alias to itself."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            children = []
        if done:
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            open_.discard(id(node))
            continue
        if id(node) in open_:
            raise yaml.composer.ComposerError(
                None, None, "an alias refers to the value that holds it", node.start_mark
            )
        open_.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def load_yaml(text: str) -> Any:
    """YAML text as data: safe tags only, a key given twice is a yaml.YAMLError."""
    return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader: no Python tags


def regular_file(path: Path, what: str) -> int:
    """The size of `path` if it is a regular file (through links). Raises ConfigError saying
    what is there instead (nothing, a folder, a device, FIFO or socket: reading one could
    block forever or never end)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what} file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {(exc.strerror or str(exc)).lower()}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{path}: is a folder, not a {what} file")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{path}: is a device, FIFO or socket, not a {what} file")
    return st.st_size


def config_file(path: Path, what: str) -> Path:
    """`path` itself if it is a regular file (through links) lumos may read whole.

    Raises ConfigError saying what is there instead (nothing, a folder, a device or FIFO),
    ResourceLimitError past `LUMOS_MAX_CONFIG_BYTES`.
    """
    MAX_CONFIG_BYTES.check(regular_file(path, what), f"{path}: size of a {what} (bytes)")
    return path


def config_bytes(path: Path, what: str) -> bytes:
    """The bytes of config `path`: `config_file`'s checks, then the size cap again on what
    was read (a file may grow, or report no size). Raises ConfigError naming `path` (also
    when it cannot be read), ResourceLimitError past `LUMOS_MAX_CONFIG_BYTES`."""
    config_file(path, what)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    MAX_CONFIG_BYTES.check(len(raw), f"{path}: size of a {what} (bytes)")
    return raw


def read_yaml(path: Path, what: str = "YAML config") -> dict[str, Any]:
    """The mapping a YAML config holds (`what` names it in errors). Raises ConfigError
    naming `path` (not a regular file, unreadable, not UTF-8, invalid YAML, not a mapping),
    ResourceLimitError past `LUMOS_MAX_CONFIG_BYTES` (checked before it is read, and again
    on what was read)."""
    raw = config_bytes(path, what)
    try:
        data = load_yaml(raw.decode())
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def read_json(path: Path, what: str = "JSON config") -> dict[str, Any]:
    """The mapping a JSON config holds (orjson), with `read_yaml`'s file checks and caps.
    Raises ConfigError naming `path` (also for invalid JSON or a top level that is not a
    mapping), ResourceLimitError past `LUMOS_MAX_CONFIG_BYTES`."""
    raw = config_bytes(path, what)
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def fields(
    data: Mapping[str, Any], table: Mapping[str, tuple[Parser, Any]], where: str
) -> dict[str, Any]:
    """Check keys against `table` (key -> (parser, default or REQUIRED)) and parse values."""
    for key in data:
        if key not in table:
            close = difflib.get_close_matches(str(key), list(table), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(table)}"
            raise ConfigError(f"{where}: unknown key {key!r}{hint}")
    out = {}
    for key, (parse, default) in table.items():
        if key in data:
            out[key] = parse(data[key], f"{where}: {key}")
        elif default is REQUIRED:
            raise ConfigError(f"{where}: missing key {key!r}")
        else:
            out[key] = default
    return out


def _finite(value: Any) -> bool:
    """A real number (not bool, NaN or infinite: YAML's .nan/.inf are floats)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _hint(value: Any) -> str:
    """Why a number written in YAML may have come out as text: YAML 1.1 (PyYAML) reads
    `2e3` as a string, `2.0e+3` as a number."""
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return ""
        return " (YAML reads it as text: write it with a point and a signed exponent, 2.0e+3)"
    return ""


def positive(value: Any, where: str) -> float:
    if not _finite(value) or value <= 0:
        raise ConfigError(f"{where} must be a positive finite number, got {value!r}{_hint(value)}")
    return float(value)


def within(low: float, high: float, unit: str, *, zero: bool = False) -> Parser:
    """A parser of a number between `low` and `high` (or exactly 0 with `zero`): the band
    every real system's value in `unit` falls in, so a value given in other units (FLOP/s
    for TFLOP/s, TB/s for GB/s, seconds for nanoseconds) is refused, not priced."""

    def parse(value: Any, where: str) -> float:
        number = non_negative(value, where) if zero else positive(value, where)
        if (zero and number == 0) or low <= number <= high:
            return number
        raise ConfigError(
            f"{where} is {value!r}, outside the {low:g} to {high:g} {unit} real hardware "
            "has: is it in other units?"
        )

    return parse


#: link and NIC latencies, collective launch: 0 (ideal) or 1 ns to 1 s. The shipped
#: configs hold 600-4,500 ns; below 1 ns a latency was written in microseconds or seconds.
LATENCY_NS = within(1.0, 1e9, "ns", zero=True)


def non_negative(value: Any, where: str) -> float:
    if not _finite(value) or value < 0:
        raise ConfigError(f"{where} must be a finite number >= 0, got {value!r}{_hint(value)}")
    return float(value)


def count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where} must be an integer >= 1, got {value!r}")
    return value


def text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, got {value!r}")
    return value


def flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where} must be true or false, got {value!r}")
    return value


def optional_positive(value: Any, where: str) -> float | None:
    return None if value is None else positive(value, where)


def choice(options: tuple[str, ...]) -> Parser:
    def parse(value: Any, where: str) -> str:
        if value not in options:
            close = difflib.get_close_matches(str(value), list(options), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{where} = {value!r} is not one of {list(options)}{hint}")
        return str(value)

    return parse


def efficiency(value: Any, where: str) -> tuple[EfficiencyPoint, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where} must be a list of [size_bytes, efficiency] pairs")
    points = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 2):
            raise ConfigError(f"{where}: entry {item!r} is not a [size_bytes, efficiency] pair")
        size = int(positive(item[0], f"{where} size"))
        eff = positive(item[1], f"{where} efficiency")
        if eff > 1:
            raise ConfigError(f"{where}: efficiency {eff} is above 1")
        points.append(EfficiencyPoint(size, eff))
    if [p.size_bytes for p in points] != sorted({p.size_bytes for p in points}):
        raise ConfigError(f"{where}: sizes must be strictly increasing")
    return tuple(points)


LINK = {
    # GB/s a direction: the shipped NVLinks hold 150-450 (NVLink 2-4); NVLink 5 is 900
    # (NVIDIA B200 datasheet), PCIe 3 x16 ~16: 1-10,000 leaves that room, not Tb/s or B/s
    "bandwidth_gbps": (within(1.0, 1e4, "GB/s a direction"), REQUIRED),
    "latency_ns": (LATENCY_NS, REQUIRED),
    "efficiency": (efficiency, (EfficiencyPoint(1, 1.0),)),
}


def link(value: Any, where: str) -> LinkSpec:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a mapping with {', '.join(LINK)}")
    return LinkSpec(**fields(value, LINK, where))


def optional_link(value: Any, where: str) -> LinkSpec | None:
    return None if value is None else link(value, where)
