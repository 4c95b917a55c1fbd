"""Type checks of a record's fields against their annotations, for records the Python API
fills from keyword arguments (`ParallelPlan`): `tp="8"`, `tp=8.0`, `tp=True` or
`sequence_parallel="no"` would otherwise be compared, truncated or taken as true deep in
the generator. Refusals name the field."""

from __future__ import annotations

import math
from dataclasses import fields
from enum import Enum
from numbers import Integral
from typing import Any

from lumos.errors import ConfigError


def is_int(value: Any) -> bool:
    """A Python int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def whole(value: Any) -> Any:
    """A numpy or other integral value as a plain int; anything else as given (for
    `check_types` to refuse by name)."""
    if isinstance(value, Integral) and not isinstance(value, bool):
        return int(value)
    return value


def check_types(record: Any, enums: dict[str, type[Enum]], where: str) -> None:
    """Each field of dataclass `record` of the type its annotation names (`int`,
    `int | None`, `bool`, `float` (a finite int or float), `str`, or an enum named in
    `enums`).

    Raises ConfigError `"{where}: {field} must be ..., got ..."` for the first that is not.
    """
    for f in fields(record):
        value = getattr(record, f.name)
        kind = str(f.type)
        if kind in ("int", "int | None"):
            ok = is_int(value) or (value is None and kind != "int")
            want = "an integer"
        elif kind == "bool":
            ok, want = isinstance(value, bool), "true or false"
        elif kind == "float":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            ok, want = ok and math.isfinite(value), "a number"
        elif kind == "str":
            ok, want = isinstance(value, str), "a string"
        else:
            enum = enums[kind]
            ok = isinstance(value, enum)
            want = "one of " + ", ".join(str(e.value) for e in enum)
        if not ok:
            raise ConfigError(f"{where}: {f.name} must be {want}, got {value!r}")


def check_recipe_fields(plan: Any) -> None:
    """A plan's recipe settings: `defer_embedding_wgrad` >= 0 and not with `a2a_overlap`,
    `attention_kernel` '' (the framework's), `cudnn` or `fa2`,
    `ub_config` empty or a config `userbuffers.RECIPES` holds."""
    from lumos.simulator.workload.userbuffers import RECIPES

    if plan.defer_embedding_wgrad < 0 or (plan.defer_embedding_wgrad and plan.a2a_overlap):
        raise ConfigError(
            "plan: defer_embedding_wgrad must be >= 0 (micro-batches; 0: none), and is "
            "not modelled with a2a_overlap"
        )
    if plan.attention_kernel not in ("", "cudnn", "fa2"):
        raise ConfigError(
            f"plan: attention_kernel must be '', 'cudnn' or 'fa2', got {plan.attention_kernel!r}"
        )
    if plan.ub_config and plan.ub_config not in RECIPES:
        raise ConfigError(
            f"plan: ub_config must be '' (by GEMM shape) or one of {sorted(RECIPES)}, "
            f"got {plan.ub_config!r}"
        )
