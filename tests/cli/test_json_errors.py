"""A command asked for `--json` that fails still prints one envelope on stdout.

The envelope carries `error` (exit code, type, the stderr message) in place of
`result`, and validates against `lumos/schemas/envelope.json`; without `--json`
stdout stays empty, so nothing changes for a person at a terminal.
"""

from __future__ import annotations

from pathlib import Path

import jsonschema
import orjson
import pytest
from click.testing import CliRunner

from lumos import schemas
from lumos.cli.envelope import SCHEMA_VERSION
from lumos.cli.main import cli


def _failed(args: list[str], code: int) -> dict:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == code, result.output
    doc = orjson.loads(result.stdout)
    jsonschema.validate(doc, schemas.load("envelope"))
    assert "result" not in doc and doc["schema_version"] == SCHEMA_VERSION
    assert doc["error"]["exit_code"] == code
    assert doc["error"]["message"] in result.stderr
    return doc


def test_lumos_error_under_json_prints_the_error_envelope() -> None:
    doc = _failed(["estimate", "--model", "no-such-model", "--json"], 4)
    assert doc["command"] == "estimate"
    assert doc["error"]["type"] == "ConfigError"
    assert "unknown model 'no-such-model'" in doc["error"]["message"]
    assert doc["options"]["model"] == "no-such-model" and doc["hardware"] is None


def test_plan_error_names_the_plan_in_the_envelope() -> None:
    doc = _failed(["estimate", "--model", "llama3-8b", "--dp", "2", "--gbs", "3", "--json"], 4)
    assert "gbs 3 is not a multiple of mbs x dp = 2" in doc["error"]["message"]


def test_unreadable_input_under_json(tmp_path: Path) -> None:
    missing = tmp_path / "nothing-here"
    doc = _failed(["simulate", str(missing), "--json"], 3)
    assert doc["command"] == "simulate" and doc["error"]["type"] == "TraceFormatError"
    assert doc["inputs"]["trace"] == str(missing)


@pytest.mark.parametrize(
    ("args", "command", "kind"),
    [
        (
            ["estimate", "--model", "llama3-8b", "--hw", "no-such-hw", "--json"],
            "estimate",
            "BadOption",
        ),
        (["et", "info", "--bogus", "--json"], "et info", "NoSuchOption"),
    ],
)
def test_usage_error_under_json(args: list[str], command: str, kind: str) -> None:
    doc = _failed(args, 2)
    assert doc["command"] == command and doc["error"]["type"] == kind


def test_without_json_stdout_stays_empty() -> None:
    result = CliRunner().invoke(cli, ["estimate", "--model", "no-such-model"])
    assert result.exit_code == 4 and result.stdout == ""
    assert result.stderr.startswith("error: unknown model")
