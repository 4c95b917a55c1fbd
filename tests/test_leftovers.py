"""What a killed run leaves is removed by the next writer of any kind, and never read as
a rank set.

A real SIGKILL of `lumos convert` mid-run leaves its hidden staging folder; the next
`et graph`, `export` or `estimate -o` into the same folder removes it (and a killed
writer's `.lumos-tmp` file) while the temporaries of a run still alive stay. Pointing
`simulate` at the leftover is a clear error, and the leftover's ranks never join a set.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.chakra.files import find_et_sources
from lumos.errors import RankSetError
from lumos.leftovers import staging_name, sweep, temp_name
from tests.conftest import DATA
from tests.converters.chakra.test_rank_sets import write_set

DDP = DATA / "captures" / "ddp"


def dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    return int(proc.stdout)


def leftovers_of(pid: int, folder: Path) -> tuple[Path, Path]:
    """A killed convert's staging folder (holding ranks 0 and 1) and a killed writer's
    temporary file, as process `pid` names them."""
    stage = folder / staging_name("out", "a1b2c3").replace(f".{os.getpid()}.", f".{pid}.")
    write_set(stage, 2)
    tmp = folder / temp_name("g.dot", "deadbeef").replace(f".{os.getpid()}.", f".{pid}.")
    tmp.write_text("digraph {")
    return stage, tmp


def test_killed_convert_staging_is_removed_by_the_next_writer(tmp_path: Path) -> None:
    parent = tmp_path / "runs"
    parent.mkdir()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from lumos.cli.main import cli; cli()",
            "convert",
            str(DDP),
            "-o",
            str(parent / "out"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not list(parent.glob(".out.*.lumos-staging")) and proc.poll() is None:
        assert time.monotonic() < deadline, "convert never created its staging folder"
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    (stage,) = parent.glob(".out.*.lumos-staging")  # what the kill left
    assert stage.is_dir()
    assert not (parent / "out").exists()
    trace = write_set(tmp_path / "set", 2)
    args = ["et", "graph", str(trace / "t.0.et"), "-o", str(parent / "g.dot")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in parent.iterdir()) == ["g.dot"]


@pytest.mark.parametrize("writer", ["et graph", "export", "estimate -o"])
def test_any_writer_removes_dead_runs_leftovers_and_keeps_live_ones(
    tmp_path: Path, writer: str
) -> None:
    parent = tmp_path / "runs"
    parent.mkdir()
    stage, tmp = leftovers_of(dead_pid(), parent)
    live_stage, live_tmp = leftovers_of(os.getppid(), parent)  # pytest's parent is alive
    trace = write_set(tmp_path / "set", 2)
    args = {
        "et graph": ["et", "graph", str(trace / "t.0.et"), "-o", str(parent / "g.dot")],
        "export": ["export", "astra-sim", str(trace / "t"), "--hw", "h100", "-o",
                   str(parent / "bundle")],
        "estimate -o": ["estimate", "--model", "llama2-7b", "--tp", "2", "--dp", "1", "-o",
                        str(parent / "ets")],
    }[writer]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert not stage.exists() and not tmp.exists()
    assert live_stage.is_dir() and live_tmp.is_file()


def test_sweep_leaves_other_hidden_files_alone(tmp_path: Path) -> None:
    (tmp_path / ".out.123.abc.lumos-staging.txt").write_text("not ours")
    (tmp_path / ".bashrc").write_text("")
    stage, tmp = leftovers_of(dead_pid(), tmp_path)
    assert sorted(sweep(tmp_path)) == sorted([stage, tmp])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".bashrc",
        ".out.123.abc.lumos-staging.txt",
    ]


def test_stale_staging_folder_is_never_a_rank_set(tmp_path: Path) -> None:
    write_set(tmp_path, 3)
    stage, _ = leftovers_of(dead_pid(), tmp_path)
    with pytest.raises(RankSetError, match="killed before it finished"):
        find_et_sources(stage)
    with pytest.raises(RankSetError, match="killed before it finished"):
        find_et_sources(stage / "t")
    result = CliRunner().invoke(cli, ["simulate", str(stage)])
    assert result.exit_code == 1 and "staging folder" in result.output
    # next to a real set, the leftover's files are not ranks of it
    assert [s.rank for s in find_et_sources(tmp_path / "t")] == [0, 1, 2]
