"""JSON / JSON Lines rendering: valid JSON, and back to the same bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.json_codec import json_to_et, write_json
from lumos.errors import TraceFormatError
from tests.conftest import fixture_path


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_chakra_et_json_round_trip(chakra_et: Path, tmp_path: Path, suffix: str) -> None:
    (source,) = find_et_sources(chakra_et)
    rendered = tmp_path / f"c{suffix}"
    with open(rendered, "wb") as f:
        assert write_json(source, f, lines=suffix == ".jsonl") == 3664
    if suffix == ".json":
        doc = json.loads(rendered.read_text())  # one valid document
        assert len(doc["nodes"]) == 3664 and doc["metadata"]["attr"][0]["name"] == "schema"
    else:
        lines = rendered.read_text().splitlines()
        assert len(lines) == 3665 and all(json.loads(x) for x in lines)
    assert json_to_et(rendered, tmp_path / "back.0.et") == 3664
    assert (tmp_path / "back.0.et").read_bytes() == chakra_et.read_bytes()


def test_custom_ring_send_recv_round_trip(tmp_path: Path) -> None:
    et = fixture_path(
        "astra-sim/examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB/custom_allreduce.3.et"
    )
    (source,) = find_et_sources(et)
    with open(tmp_path / "r.json", "wb") as f:
        write_json(source, f, lines=False)
    json_to_et(tmp_path / "r.json", tmp_path / "r.3.et")
    assert (tmp_path / "r.3.et").read_bytes() == et.read_bytes()


def test_bad_json_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"metadata": {"version": "0.0.4"}}\n{"id": "1", "name": "x"}\n{not json\n')
    with pytest.raises(TraceFormatError, match=r"b\.jsonl \(line 3\): invalid JSON"):
        json_to_et(bad, tmp_path / "o.0.et")
    assert not (tmp_path / "o.0.et").exists()
