"""Every command's `--json` is the versioned envelope around a result its schema allows.

Runs each command on the bundled DDP capture (tests/data/captures/ddp) and validates the
output with `jsonschema` against `lumos/schemas/envelope.json` and the command's own
schema; a command that gains `--json` without a schema fails here.
"""

from __future__ import annotations

from pathlib import Path

import click
import jsonschema
import orjson
import pytest
from click.testing import CliRunner

from lumos import __version__, schemas
from lumos.cli.envelope import SCHEMA_VERSION
from lumos.cli.main import COMMANDS, cli
from lumos.simulator.whatif.etset import write_etset
from tests.conftest import DATA
from tests.simulator.whatif.builders import training_step

DDP = DATA / "captures" / "ddp"


def _json_commands() -> list[str]:
    """Every command path (dash-joined) that has a --json option."""
    found = []

    def walk(cmd: click.Command, path: list[str]) -> None:
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        elif any(p.name == "as_json" for p in cmd.params):
            found.append("-".join(path))

    ctx = click.Context(cli)
    for name in COMMANDS:
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        walk(cmd, [name])
    return sorted(found)


@pytest.fixture(scope="module")
def ddp_et(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("schema") / "et"
    result = CliRunner().invoke(cli, ["convert", str(DDP), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def _validated(name: str, args: list[str]) -> dict:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (0, 1), result.output
    doc = orjson.loads(result.stdout)
    jsonschema.validate(doc, schemas.load("envelope"))
    jsonschema.validate(doc["result"], schemas.load(name))
    assert doc["schema_version"] == SCHEMA_VERSION and doc["lumos_version"] == __version__
    grouped = name.startswith(("et-", "hw-", "export-"))
    assert doc["command"] == (name.replace("-", " ", 1) if grouped else name)
    return doc


def test_every_json_command_has_a_schema() -> None:
    missing = [c for c in _json_commands() if c not in schemas.names()]
    assert not missing, f"add lumos/schemas/<name>.json (docs/json.md) for: {missing}"


def test_every_schema_is_a_valid_schema() -> None:
    for name in schemas.names():
        jsonschema.Draft202012Validator.check_schema(schemas.load(name))


def test_every_command_output_validates(ddp_et: Path, tmp_path: Path) -> None:
    whatif_et = tmp_path / "whatif"
    write_etset(training_step(layers=2), whatif_et)
    runs = {
        "convert": ["convert", str(DDP), "-o", str(tmp_path / "c"), "--json"],
        "simulate": ["simulate", str(ddp_et), "--hw", "H100", "--json"],
        "compare": ["compare", str(ddp_et), "--json"],
        "et-info": ["et", "info", str(ddp_et), "--json"],
        "et-validate": ["et", "validate", str(ddp_et), "--json"],
        "export-astra-sim": [
            "export", "astra-sim", str(ddp_et), "-o", str(tmp_path / "b"), "--hw", "h100", "--json"
        ],
        "hw-list": ["hw", "list", "--json"],
        "whatif": ["whatif", str(whatif_et), "--slow-rank", "1=1.5", "--json"],
        "estimate": ["estimate", "--model", "llama2-7b", "--tp", "2", "--dp", "2", "--json"],
        "sweep": [
            "sweep", "--model", "gpt3-1.3b", "--gpus", "2", "--gbs", "2", "--seq", "256",
            "--tp", "2", "--pp", "1", "--mbs", "1", "--recompute", "none", "--workers", "1",
            "-o", str(tmp_path / "s.csv"), "--json",
        ],
        "hw-show": ["hw", "show", "v100", "--json"],
    }  # fmt: skip
    assert sorted(runs) == _json_commands()
    docs = {name: _validated(name, args) for name, args in runs.items()}
    sim = docs["simulate"]
    assert sim["inputs"] == {"trace": str(ddp_et)}
    assert sim["hardware"]["system"] == "h100" and sim["hardware"]["gpu"] == "h100_sxm"
    assert sim["options"]["hw"] == "h100" and "as_json" not in sim["options"]
    # wall-clock time is in timings only: the result of two runs is identical
    assert {"wall_s", "load_s", "run_s"} <= set(sim["timings"])
    again = _validated("simulate", runs["simulate"])
    assert again["result"] == sim["result"]
    breakdown = sim["result"]["ranks"][0]["breakdown"]
    parts = sum(v for k, v in breakdown.items() if k.endswith("_ns"))
    assert parts == sim["result"]["ranks"][0]["iteration_time_ns"]
    assert docs["compare"]["hardware"] is None
    assert docs["convert"]["result"]["ranks"][0]["link"]["rate"] > 0.9


def test_a_wrong_result_is_caught() -> None:
    doc = {"mode": "replay", "iteration_time_ns": -1}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schemas.load("simulate"))
