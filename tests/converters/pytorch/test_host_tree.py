"""A damaged host ET's node tree: loops, repeated ids, an unknown schema, huge sizes.

Each input is the DDP capture's rank-0 host ET (schema 1.1.1, the real field layout)
with one edit, converted host-only as `lumos convert` does. Before: parent loops dropped
the nodes on them silently (873 -> 870 nodes), a repeated id added nodes (875), schema
`9.9.9` was read as the newest without a word, and a collective of 1e19 elements was
`internal error: ValueError` (exit 70).
"""

from __future__ import annotations

import copy
import gzip
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.pytorch.host_et import load_host_et
from lumos.converters.pytorch.host_tree import _in_loops
from lumos.converters.pytorch.json_stream import TraceFile
from lumos.errors import TraceFormatError
from tests.conftest import DATA

BASE = json.loads(
    gzip.decompress((DATA / "captures" / "ddp" / "rank0.host_et.json.gz").read_bytes())
)


def _named(doc: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [n for n in doc["nodes"] if n["name"] == name]


def _convert(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> tuple[int, str]:
    doc = copy.deepcopy(BASE)
    edit(doc)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "rank0.host_et.json").write_text(json.dumps(doc))
    result = CliRunner().invoke(cli, ["convert", str(folder), "-o", str(tmp_path / "out")])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def _two_node_loop(doc: dict[str, Any]) -> None:
    a, b = _named(doc, "aten::mm")[:2]
    a["ctrl_deps"], b["ctrl_deps"] = b["id"], a["id"]


def _root_loop(doc: dict[str, Any]) -> None:
    doc["nodes"][0]["ctrl_deps"] = doc["nodes"][1]["id"]


@pytest.mark.parametrize("edit", [_two_node_loop, _root_loop], ids=["ops", "root"])
def test_parents_forming_a_loop_are_an_error(tmp_path: Path, edit: Any) -> None:
    code, out = _convert(tmp_path, edit)
    assert code == 3 and "never reached from a root" in out and "loops; ids" in out
    assert not (tmp_path / "out").exists()


def test_a_node_id_given_twice_is_an_error(tmp_path: Path) -> None:
    def repeat(doc: dict[str, Any]) -> None:
        first, second = _named(doc, "aten::mm")[:2]
        second["id"] = first["id"]

    code, out = _convert(tmp_path, repeat)
    assert code == 3 and "node id 488 appears 2 times" in out


def test_own_parent_and_unknown_parent_are_roots_not_errors(tmp_path: Path) -> None:
    def edit(doc: dict[str, Any]) -> None:
        first, second = _named(doc, "aten::mm")[:2]
        first["ctrl_deps"], second["ctrl_deps"] = first["id"], 10**9

    assert _convert(tmp_path, edit)[0] == 0


def test_unknown_schema_is_read_as_the_closest_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="lumos"):
        code, _ = _convert(tmp_path, lambda doc: doc.__setitem__("schema", "9.9.9"))
    assert code == 0
    assert "host-ET schema '9.9.9' is not one lumos lists; read as 1.1.1-chakra.1.0.0" in (
        caplog.text
    )


def test_unknown_schema_is_reported_in_convert_json_problems(tmp_path: Path) -> None:
    """A user reading `convert --json` (not the log) learns the file was read as another
    schema: the line is in `problems` and in the rank's `notes` (before: the log only)."""
    doc = copy.deepcopy(BASE)
    doc["schema"] = "9.9.9"
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "rank0.host_et.json").write_text(json.dumps(doc))
    args = ["convert", str(folder), "-o", str(tmp_path / "out"), "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)["result"]
    line = "host-ET schema '9.9.9' is not one lumos lists; read as 1.1.1-chakra.1.0.0"
    assert [p for p in out["problems"] if line in p and p.startswith("rank 0: ")]
    assert [n for n in out["ranks"][0]["notes"] if "rank0.host_et.json" in n and line in n]


def test_collective_past_64_bits_is_a_format_error(tmp_path: Path) -> None:
    def edit(doc: dict[str, Any]) -> None:
        for node in _named(doc, "gloo:all_reduce"):
            node["inputs"]["shapes"] = [[10**19]]
            node["inputs"]["values"][0][3] = 10**19

    code, out = _convert(tmp_path, edit)
    assert code == 3 and "'comm_size' = 40000000000000000000 does not fit" in out


def test_loop_search_is_linear_in_the_usual_order() -> None:
    """Parents before children (every real trace): one comparison, no doubling."""
    ids = np.arange(1, 2_000_001)
    parent = np.maximum(1, ids - 7)
    parent[0] = 0
    assert len(_in_loops(ids, parent)) == 0
    parent[100], parent[5000] = 5001, 101  # 101 -> 5001 -> 101: a loop, and what hangs below
    assert {101, 5001} <= set(ids[_in_loops(ids, parent)].tolist())


def _set_mm(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit setting `field` of the first aten::mm (id 488; rf_id among its attrs)."""

    def edit(doc: dict[str, Any]) -> None:
        node = _named(doc, "aten::mm")[0]
        if field == "rf_id":
            next(a for a in node["attrs"] if a["name"] == "rf_id")["value"] = value
        else:
            node[field] = value

    return edit


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("id", 2**64, "id 1.8446744073709552e+19 is not a node id"),
        ("id", None, "id None is not a node id"),
        ("id", "abc", "id 'abc' is not a node id"),
        ("id", 488.5, "id 488.5 is not a node id"),
        ("id", True, "id True is not a node id"),
        ("id", -5, "id -5 is not a node id"),
        ("ctrl_deps", 2**64, "parent 1.8446744073709552e+19 is not a node id"),
        ("ctrl_deps", "x", "parent 'x' is not a node id"),
        ("rf_id", 2**64, "rf_id 1.8446744073709552e+19 is past 64 bits"),
    ],
)
def test_ids_that_are_not_whole_64_bit_numbers_name_the_node(
    tmp_path: Path, field: str, value: Any, message: str
) -> None:
    """Before: past 2^63 `internal error: OverflowError` (2^64 reads as a float, and is
    named as one); null, text or a negative id became -1 (a node no parent or link could
    name) and 488.5 became 488, without a word."""
    doc = copy.deepcopy(BASE)
    _set_mm(field, value)(doc)
    path = tmp_path / "rank0.host_et.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(
        TraceFormatError, match=r"rank0.host_et.json: node .* \('aten::mm'\)"
    ) as err:
        load_host_et(TraceFile(str(path)))
    assert message in str(err.value)


def test_an_id_past_63_bits_is_exit_3_not_an_internal_error(tmp_path: Path) -> None:
    code, out = _convert(tmp_path, _set_mm("id", 2**63))
    assert code == 3 and "id 9223372036854775808 is not a node id" in out, out
    assert not (tmp_path / "out").exists()
