"""Typed field parsers of hardware YAML: numbers, counts, links, curves; errors name file and key."""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from lumos.errors import ConfigError
from lumos.hwconfigs.schema import EfficiencyPoint, LinkSpec

REQUIRED = object()
Parser = Callable[[Any, str], Any]


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
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


def positive(value: Any, where: str) -> float:
    if not _finite(value) or value <= 0:
        raise ConfigError(f"{where} must be a positive finite number, got {value!r}")
    return float(value)


def non_negative(value: Any, where: str) -> float:
    if not _finite(value) or value < 0:
        raise ConfigError(f"{where} must be a finite number >= 0, got {value!r}")
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
    "bandwidth_gbps": (positive, REQUIRED),
    "latency_ns": (non_negative, REQUIRED),
    "efficiency": (efficiency, (EfficiencyPoint(1, 1.0),)),
}


def link(value: Any, where: str) -> LinkSpec:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a mapping with {', '.join(LINK)}")
    return LinkSpec(**fields(value, LINK, where))


def optional_link(value: Any, where: str) -> LinkSpec | None:
    return None if value is None else link(value, where)
