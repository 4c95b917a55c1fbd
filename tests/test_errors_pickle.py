"""Every lumos error crosses a process boundary whole: type, message and fields.

Pool workers (convert's forked ranks, the sweep's engines) send their exceptions to the
parent by pickling; the default pickling re-runs `__init__` with the formatted message
only, which fails (TraceFormatError needs path and message) or turns fields into the
message. The table below must name every class in lumos.errors, so a new class cannot
skip this test.
"""

from __future__ import annotations

import inspect
import pickle
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

from lumos import errors

EXAMPLES: dict[str, Any] = {
    "LumosError": lambda: errors.LumosError("something"),
    "TraceFormatError": lambda: errors.TraceFormatError(
        "run/t.3.et", "truncated frame", where="byte 1234"
    ),
    "ValidationError": lambda: errors.ValidationError(
        [f"t.0.et node {i}: dangling" for i in range(25)], header="validation of t failed"
    ),
    "ConfigError": lambda: errors.ConfigError("h100.yaml: unknown key 'bandwdith_gbps'"),
    "LinkError": lambda: errors.LinkError("rank 2: no Kineto trace"),
    "SimulationError": lambda: errors.SimulationError("deadlock at rank 1 node 7"),
    "ExportError": lambda: errors.ExportError("rank 0 node 3: comm_size missing"),
    "RankSetError": lambda: errors.RankSetError(["1 of 4 ranks are missing: 2"]),
    "OutputError": lambda: errors.OutputError("out.json: no space left on device"),
    "ResourceLimitError": lambda: errors.ResourceLimitError(
        "world_size", 10**9, 1 << 16, "LUMOS_MAX_WORLD"
    ),
    "MissingExtraError": lambda: errors.MissingExtraError("matplotlib", "plot"),
}


def _classes() -> list[type[errors.LumosError]]:
    return [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.LumosError) and cls.__module__ == errors.__name__
    ]


def _fields(error: BaseException) -> dict[str, Any]:
    return {"type": type(error), "str": str(error), "args": error.args, **vars(error)}


def test_every_error_class_has_an_example() -> None:
    assert {c.__name__ for c in _classes()} == set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_error_pickles_with_its_fields(name: str) -> None:
    error = EXAMPLES[name]()
    back = pickle.loads(pickle.dumps(error))
    assert _fields(back) == _fields(error)
    assert vars(error) or name not in ("TraceFormatError", "ValidationError", "RankSetError")


def _raise(name: str) -> None:
    raise EXAMPLES[name]()


def test_trace_format_error_from_a_pool_worker_keeps_path_and_where() -> None:
    with ProcessPoolExecutor(1) as pool:
        future = pool.submit(_raise, "TraceFormatError")
        with pytest.raises(errors.TraceFormatError) as caught:
            future.result(timeout=60)
    assert caught.value.path == "run/t.3.et"
    assert caught.value.where == "byte 1234"
    assert str(caught.value) == "run/t.3.et (byte 1234): truncated frame"
