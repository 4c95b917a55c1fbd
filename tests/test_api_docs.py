"""The Python facade: the examples of docs/api.md run as written, results match the CLI.

`import lumos` stays light (the facade loads on first attribute access).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import lumos
from lumos.cli.main import cli
from lumos.errors import MissingExtraError
from tests.conftest import DATA, REPO

BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "api.md").read_text(), re.S)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "tests" / "data").mkdir(parents=True)
    (tmp_path / "tests" / "data" / "captures").symlink_to(DATA / "captures")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_import_lumos_is_light() -> None:
    code = "import sys, lumos; print(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout.split()
    assert not [m for m in loaded if m.startswith(("numpy", "lumos.api", "lumos.simulator"))]


def test_docs_examples_run(workdir: Path) -> None:
    assert len(BLOCKS) == 4
    pytest.importorskip("pandas")
    for block in BLOCKS:
        exec(compile(block, "docs/api.md", "exec"), {})
    assert (workdir / "bundle" / "run.sh").is_file()
    assert sorted(p.name for p in (workdir / "ets").glob("*.et")) == ["trace.0.et", "trace.1.et"]


def test_facade_result_equals_cli_json(workdir: Path) -> None:
    lumos.convert(DATA / "captures" / "ddp", "ets")
    sim = lumos.simulate("ets", hw="h100")
    out = CliRunner().invoke(cli, ["simulate", "ets", "--hw", "h100", "--json"])
    assert out.exit_code == 0, out.output
    assert orjson.loads(out.stdout)["result"] == orjson.loads(orjson.dumps(sim.to_json()))
    assert sim.step_ns == sim.to_json()["iteration_time_ns"] > 0


def test_to_pandas_tables(workdir: Path) -> None:
    pytest.importorskip("pandas")
    lumos.convert(DATA / "captures" / "ddp", "ets")
    sim = lumos.simulate("ets")
    ranks = sim.to_pandas()
    assert list(ranks.index) == [0, 1]
    assert (ranks.iteration_time_ns == [r.iteration_time_ns for r in sim.raw.ranks]).all()
    ops = sim.to_pandas("ops")
    assert len(ops) == sum(len(r.tasks) for r in sim.raw.ranks)
    assert (ops.end_ns >= ops.start_ns).all()


def test_to_pandas_without_pandas_names_the_extra(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lumos.convert(DATA / "captures" / "ddp", "ets")
    sim = lumos.simulate("ets")
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(MissingExtraError, match=r"lumos\[pandas\]"):
        sim.to_pandas()


def test_whatif_facade_returns_the_typed_prediction_and_the_cli_json(tmp_path: Path) -> None:
    from lumos.api_whatif import WhatIfPrediction
    from lumos.errors import ConfigError
    from lumos.simulator.whatif.etset import write_etset
    from tests.simulator.whatif.builders import training_step

    write_etset(training_step(layers=2), tmp_path / "ets")
    pred = lumos.whatif(tmp_path / "ets", layers=4, slow_ranks={1: 1.5}, output=tmp_path / "out")
    assert isinstance(pred, WhatIfPrediction)
    assert pred.step_ns > pred.base_step_ns > 0
    assert pred.edits == ["layers: 2 -> 4", "rank 1 compute x1.5"]
    assert sorted(p.name for p in (tmp_path / "out").glob("*.et")) == ["whatif.0.et", "whatif.1.et"]
    args = ["whatif", str(tmp_path / "ets"), "--layers", "4", "--slow-rank", "1=1.5", "--json"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    cli_json = orjson.loads(out.stdout)["result"]
    mine = pred.to_json()
    assert mine["written"] and cli_json["written"] == []
    assert {**mine, "written": []} == cli_json
    with pytest.raises(ConfigError, match="unknown what-if edit"):
        lumos.whatif(tmp_path / "ets", layer=4)
