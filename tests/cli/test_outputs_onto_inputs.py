"""An output that is the command's own input, or a symbolic-link loop.

`--force` replaces outputs lumos wrote, and the rank files of a set are outputs lumos
wrote: `simulate T --timeline T/t.0.et --force` replaced the trace it had just read with
its timeline. And a link loop at the output path reached `Path.resolve`, whose
RuntimeError was an internal error (exit 70).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from tests.converters.astra_sim.test_export import all_reduce, write_trace


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    return result.exit_code, result.output


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "et", [[all_reduce(1)], [all_reduce(1)]])


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "{et}", "--hw", "h100", "--timeline", "{et}/t.0.et"],
        ["simulate", "{et}/t", "--hw", "h100", "--timeline", "{et}/t.1.et"],
        ["compare", "{et}", "--timeline", "{et}/t.1.et"],
        ["et", "to-json", "{et}/t.0.et", "-o", "{et}/t.0.et"],
        ["et", "from-json", "{et}/t.0.et", "-o", "{et}/t.0.et"],
    ],
    ids=["simulate", "simulate-prefix", "compare", "to-json", "from-json"],
)
def test_an_output_that_is_an_input_is_refused_even_with_force(
    trace: Path, args: list[str]
) -> None:
    before = {p.name: p.read_bytes() for p in trace.iterdir()}
    code, output = _run(*[a.format(et=trace) for a in args], "--force")
    assert code == 5, output
    assert "is an input of this command" in output and "t." in output
    assert {p.name: p.read_bytes() for p in trace.iterdir()} == before


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "{et}", "--hw", "h100", "--timeline", "{loop}"],
        ["compare", "{et}", "--timeline", "{loop}"],
        ["et", "to-json", "{et}/t.0.et", "-o", "{loop}"],
        ["convert", "{et}", "-o", "{loop}"],
        ["export", "astra-sim", "{et}", "--hw", "h100", "-o", "{loop}"],
        ["estimate", "--model", "llama3.1-8b", "--tp", "8", "-o", "{loop}"],
    ],
    ids=["simulate", "compare", "to-json", "convert", "export", "estimate"],
)
def test_an_output_through_a_link_loop_is_one_error(
    trace: Path, tmp_path: Path, args: list[str]
) -> None:
    loop = tmp_path / "loop"
    os.symlink(tmp_path / "loop2", loop)
    os.symlink(loop, tmp_path / "loop2")
    code, output = _run(*[a.format(et=trace, loop=loop) for a in args])
    assert code == 6, output
    assert f"{loop}: a symbolic link loop" in output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["et", "loop", "loop2"]
