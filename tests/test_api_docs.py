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
