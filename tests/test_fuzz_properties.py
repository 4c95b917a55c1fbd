"""Property-based fuzzing (Hypothesis) of every reader that takes user input.

For any bytes, any mutation of a valid file and any JSON-shaped value, the ET reader and
validator, the JSON trace loaders, `et from-json`, the Kineto loader and the config
loaders either succeed or raise a lumos error: never another exception, never a hang. And
where the input is valid, the streaming paths agree with the whole-file ones (round
trips, batched JSON == parsed JSON). Example counts are bounded to keep this fast;
`scripts/fuzz_harness.py` runs the long campaign through the CLI.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

pytest.importorskip("hypothesis", reason="the dev extra installs hypothesis")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lumos.converters.astra_sim.config_files import (
    load_pg_ranks,
    network_from_dict,
    system_from_dict,
)
from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.json_codec import json_to_et
from lumos.converters.chakra.stream import EtReader, read_et, with_node_count, write_et
from lumos.converters.chakra.validate import validate_sources
from lumos.converters.pytorch.json_stream import TraceFile, read_array_document
from lumos.converters.pytorch.kineto import load_kineto
from lumos.errors import LumosError
from lumos.hwconfigs.load import load_system
from lumos.proto import pb
from tests.astra_cases import RING_SYSTEM as SYSTEM

FAST = settings(
    max_examples=15,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def et_nodes(draw: Any) -> list[pb.Node]:
    """A small valid DAG: ids 1..n, each node depending on earlier ones only."""
    n = draw(st.integers(min_value=1, max_value=12))
    nodes = []
    for i in range(1, n + 1):
        node = pb.Node(
            id=i,
            name=draw(st.text(max_size=10)),
            type=draw(st.sampled_from([pb.COMP_NODE, pb.MEM_LOAD_NODE, pb.METADATA_NODE])),
            duration_micros=draw(st.integers(min_value=0, max_value=10**6)),
        )
        if i > 1:
            node.data_deps.extend(draw(st.sets(st.integers(1, i - 1), max_size=3)))
        nodes.append(node)
    return nodes


def _meta() -> pb.GlobalMetadata:
    return pb.GlobalMetadata(version="0.0.4")


def _read_all(path: Path) -> None:
    with EtReader(path) as reader:
        for _ in reader:
            pass
    validate_sources(find_et_sources(path))


@FAST
@given(nodes=et_nodes())
def test_et_round_trip_is_lossless(tmp_path: Path, nodes: list[pb.Node]) -> None:
    path = tmp_path / "r.0.et"
    write_et(path, with_node_count(_meta(), len(nodes)), nodes)
    _, back = read_et(path)
    assert back == nodes
    report = validate_sources(find_et_sources(path))
    assert report.errors == []


@FAST
@given(nodes=et_nodes(), data=st.data())
def test_et_cut_anywhere_is_a_clean_error(tmp_path: Path, nodes: list[pb.Node], data: Any) -> None:
    path = tmp_path / "c.0.et"
    write_et(path, with_node_count(_meta(), len(nodes)), nodes)
    raw = path.read_bytes()
    cut = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
    path.write_bytes(raw[:cut])
    with pytest.raises(LumosError):
        _read_all(path)


@FAST
@given(nodes=et_nodes(), data=st.data())
def test_et_mutations_raise_only_lumos_errors(
    tmp_path: Path, nodes: list[pb.Node], data: Any
) -> None:
    path = tmp_path / "m.0.et"
    write_et(path, with_node_count(_meta(), len(nodes)), nodes)
    raw = bytearray(path.read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    path.write_bytes(bytes(raw))
    with contextlib.suppress(LumosError):
        _read_all(path)


@FAST
@given(blob=st.binary(max_size=400))
def test_et_reader_on_any_bytes(tmp_path: Path, blob: bytes) -> None:
    path = tmp_path / "b.0.et"
    path.write_bytes(blob)
    with contextlib.suppress(LumosError):
        _read_all(path)


@FAST
@given(
    events=st.lists(st.dictionaries(st.sampled_from(["ph", "name", "x"]), json_values), max_size=30)
)
def test_streamed_json_array_equals_the_parsed_document(
    tmp_path: Path, events: list[dict[str, Any]]
) -> None:
    doc = {"schemaVersion": 1, "traceEvents": events, "tail": [1, 2]}
    try:
        text = orjson.dumps(doc)
    except TypeError:
        return  # ints beyond 64 bits: not representable as JSON by orjson
    path = tmp_path / "k.json"
    path.write_bytes(text)
    got: list[Any] = []
    rest = read_array_document(TraceFile(str(path)), "traceEvents", got.extend, chunk_bytes=64)
    expected = orjson.loads(text)
    assert got == expected["traceEvents"]
    assert rest == {"schemaVersion": 1, "tail": [1, 2]}


@FAST
@given(value=json_values, blob=st.binary(max_size=200))
def test_json_loaders_raise_only_lumos_errors(tmp_path: Path, value: Any, blob: bytes) -> None:
    try:
        text = orjson.dumps({"traceEvents": value})
    except TypeError:
        text = blob
    path = tmp_path / "j.json"
    source = TraceFile(str(path))
    calls = (
        lambda: read_array_document(source, "traceEvents", lambda b: None),
        lambda: load_kineto(source),
        lambda: json_to_et(path, tmp_path / "o.0.et"),
    )
    for data in (text, blob, text[: len(text) // 2]):
        path.write_bytes(data)
        for call in calls:
            with contextlib.suppress(LumosError):
                call()


kineto_event = st.fixed_dictionaries(
    {"ph": st.just("X")},
    optional={
        "name": json_values,
        "cat": st.sampled_from(["cpu_op", "kernel", "cuda_runtime"]) | json_values,
        "ts": st.integers(-10, 10**6) | json_values,
        "dur": st.integers(-10, 10**4) | json_values,
        "pid": st.integers(0, 3) | json_values,
        "tid": st.integers(0, 3) | json_values,
        "args": st.dictionaries(
            st.sampled_from(["stream", "correlation", "External id"]), json_values
        )
        | json_values,
    },
)


@FAST
@given(events=st.lists(kineto_event, min_size=1, max_size=20))
def test_kineto_loader_on_hostile_events(tmp_path: Path, events: list[dict[str, Any]]) -> None:
    try:
        text = orjson.dumps({"schemaVersion": 1, "traceEvents": events})
    except TypeError:
        return
    path = tmp_path / "rank0.kineto.json"
    path.write_bytes(text)
    with contextlib.suppress(LumosError):
        load_kineto(TraceFile(str(path)))


NETWORK = {"topology": ["Ring"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]}


@FAST
@given(key=st.sampled_from(sorted(SYSTEM)), value=json_values)
def test_astra_system_loader_any_value(key: str, value: Any) -> None:
    try:
        config = system_from_dict({**SYSTEM, key: value}, "system.json")
    except LumosError:
        return
    assert config.active_chunks_per_dimension >= 1
    assert math.isfinite(config.local_mem_bw_gbps)


@FAST
@given(key=st.sampled_from(sorted(NETWORK)), value=json_values)
def test_astra_network_loader_any_value(key: str, value: Any) -> None:
    try:
        config = network_from_dict({**NETWORK, key: value}, "network.yml")
    except LumosError:
        return
    assert all(math.isfinite(b) and b > 0 for b in config.bandwidth_gbps)


@FAST
@given(value=json_values, raw=st.binary(max_size=60))
def test_hw_yaml_and_comm_group_loaders_any_input(tmp_path: Path, value: Any, raw: bytes) -> None:
    system = tmp_path / "sys.yaml"
    groups = tmp_path / "groups.json"
    for text in (yaml.safe_dump({"node": "h100_sxm", "num_nodes": value}).encode(), raw):
        system.write_bytes(text)
        groups.write_bytes(text)
        for call in (lambda: load_system(system), lambda: load_pg_ranks(str(groups))):
            with contextlib.suppress(LumosError):
                call()


# --- second audit (issue 11): tars, YAML, times, names, groups, host trees, limits ------

#: pure functions: cheap enough for more examples
MANY = settings(max_examples=200, derandomize=True, deadline=None)


def _tar_of(members: dict[str, bytes]) -> bytes:
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


@FAST
@given(
    names=st.lists(st.sampled_from(["t.0.et", "t.1.et", "../t.2.et", "/x/t.3.et"]), max_size=4),
    data=st.data(),
)
def test_tar_readers_on_any_cut_raise_only_lumos_errors(
    tmp_path: Path, names: list[str], data: Any
) -> None:
    from lumos.converters.chakra.archive import open_tar, read_member

    raw = _tar_of({n: data.draw(st.binary(max_size=600)) for n in names})
    cut = data.draw(st.integers(0, len(raw)))
    path = tmp_path / "a.tar"
    path.write_bytes(raw[:cut] + data.draw(st.binary(max_size=8)))
    with contextlib.suppress(LumosError):
        with open_tar(path) as tar:
            members = [m.name for m in tar if m.isfile()]
        for name in members:
            read_member(str(path), name, f"{path}:{name}")
    with contextlib.suppress(LumosError):
        _read_all(path)


yaml_text = st.recursive(
    st.sampled_from(["1", "x", "1e999", ".nan", "*a", "!!python/object:os.system x", "[]"]),
    lambda inner: (
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]")
        | st.tuples(st.sampled_from(["k", "a", "num_nodes"]), inner).map(
            lambda kv: "{" + f"{kv[0]}: {kv[1]}" + "}"
        )
        | inner.map(lambda x: f"&a {x}")
    ),
    max_leaves=10,
)


@MANY
@given(text=yaml_text, repeat=st.booleans())
def test_yaml_loader_raises_only_yaml_errors(text: str, repeat: bool) -> None:
    from lumos.hwconfigs.fields import load_yaml

    doc = f"name: {text}\n" + ("name: again\n" if repeat else "")
    try:
        load_yaml(doc)
    except yaml.YAMLError:
        return
    assert not repeat  # a key given twice never loads


@FAST
@given(width=st.integers(1, 9), depth=st.integers(1, 6))
def test_yaml_alias_budget_counts_what_expansion_would_build(width: int, depth: int) -> None:
    from lumos.hwconfigs.fields import MAX_YAML_VALUES, _expanded_size

    lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, depth)]
    text = "\n".join(lines) + "\n"
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    expected = 1 + sum(  # the top mapping, each key, and every list fully expanded
        1 + sum(width**j for j in range(1, i + 2)) + 1 for i in range(depth)
    )
    assert _expanded_size(node) == expected
    if expected > MAX_YAML_VALUES:
        from lumos.hwconfigs.fields import load_yaml

        with pytest.raises(yaml.YAMLError, match="alias bomb"):
            load_yaml(text)


@MANY
@given(values=st.lists(scalars | st.integers(-(10**17), 10**17), min_size=1, max_size=20))
def test_kineto_times_are_exact_or_refused(values: list[Any]) -> None:
    from lumos.converters.pytorch.kineto import MAX_US, BadNumber, ns_array

    try:
        out = ns_array(values)
    except BadNumber as exc:
        bad = values[exc.index]
        assert type(bad) is bool or not isinstance(bad, (int, float)) or not abs(bad) < MAX_US
        return
    for value, ns in zip(values, out.tolist(), strict=True):
        assert type(value) is not bool and abs(value) < MAX_US
        assert ns == round(value * 1000) or abs(ns - value * 1000) <= 1


@MANY
@given(text=st.text())
def test_printable_leaves_no_control_character(text: str) -> None:
    from lumos.outputs import printable

    out = printable(text)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c == "\u202e" for c in out)
    assert printable(out) == out


@MANY
@given(value=json_values, raw=st.text(max_size=20))
def test_process_groups_parse_or_say_why(value: Any, raw: str) -> None:
    from lumos.converters.chakra.conventions import parse_process_groups

    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = raw
    for candidate in (text, raw, value):
        groups, why = parse_process_groups(candidate)
        assert (why is None) or groups == {}
        assert all(type(r) is int and r >= 0 for members in groups.values() for r in members)


@MANY
@given(parents=st.lists(st.integers(-1, 12), min_size=1, max_size=12))
def test_host_parent_loops_match_a_plain_walk(parents: list[int]) -> None:
    import numpy as np

    from lumos.converters.pytorch.host_tree import _in_loops

    ids = np.arange(1, len(parents) + 1)
    parent = np.asarray(parents, np.int64)
    by_id = dict(zip(ids.tolist(), parents, strict=True))
    expected = []
    for row, node in enumerate(ids.tolist()):
        seen, at = set(), node
        while at in by_id and by_id[at] != at and at not in seen:
            seen.add(at)
            at = by_id[at]
        if at in seen:  # walked back onto its own chain: never reaches a root
            expected.append(row)
    assert _in_loops(ids, parent).tolist() == expected


@FAST
@given(raw=st.text(max_size=12))
def test_limit_values_are_whole_numbers_or_a_config_error(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    from lumos.errors import ConfigError
    from lumos.limits import MAX_RANKS

    if "\0" in raw:
        return  # the environment cannot hold NUL
    monkeypatch.setenv(MAX_RANKS.env, raw)
    try:
        value = MAX_RANKS.value
    except ConfigError as exc:
        assert MAX_RANKS.env in str(exc)
        return
    assert isinstance(value, int) and value >= 1
