"""Bad input to `lumos convert`: one clear error naming the file and event, no output."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.pytorch.convert import convert
from lumos.errors import TraceFormatError
from tests.conftest import DATA

KINETO = DATA / "captures" / "ddp" / "rank0.kineto.json.gz"


def test_truncated_gzip_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "rank0.kineto.json.gz"
    bad.write_bytes(KINETO.read_bytes()[:5000])
    result = CliRunner().invoke(cli, ["convert", str(bad), "-o", str(tmp_path / "out")])
    assert result.exit_code == 3
    assert "rank0.kineto.json.gz: truncated or corrupt gzip data" in result.output
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_non_numeric_timestamp_names_the_event(tmp_path: Path) -> None:
    bad = tmp_path / "rank0.kineto.json"
    bad.write_text(
        '{"traceEvents": [{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":10,"dur":5,"pid":1,"tid":1},'
        '{"ph":"X","cat":"kernel","name":"sgemm","ts":"abc","dur":1,"pid":0,"tid":7,"args":{"stream":7}}]}'
    )
    with pytest.raises(
        TraceFormatError, match=r"complete event #1\): event 'sgemm': 'ts' is 'abc'"
    ):
        convert([str(bad)], tmp_path / "out")
    assert not list((tmp_path / "out").glob("*.et")) if (tmp_path / "out").exists() else True


def test_trace_with_nothing_to_convert_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "rank0.host_et.json.gz"
    empty.write_bytes(gzip.compress(b'{"schema": "1.1.1-chakra.0.0.4", "pid": 1, "nodes": []}'))
    with pytest.raises(TraceFormatError, match="rank 0: nothing to convert"):
        convert([str(empty)], tmp_path / "out")
