"""What-if edits no trace can take are refused before any edit runs (`whatif.checks`).

The red-team round found a NaN straggler factor or jitter ending in `internal error:
ValueError` (exit 70), a 1e300 factor overflowing the ETs' 64-bit durations (exit 70), a
jitter spread of 100 accepted (every kernel then ~0 ns: a faster step, not a jittered
one), and `--dp 1000000` / `--layers 1000000` copying nodes for minutes with no limit.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.simulator.whatif.etset import write_etset
from tests.simulator.whatif.builders import training_step


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("base")
    write_etset(training_step(layers=2), folder)
    return folder


def run(trace: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Exit code, and stdout with --json (else everything printed)."""
    result = CliRunner().invoke(cli, ["whatif", str(trace), *args], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    return result.exit_code, result.stdout if "--json" in args else result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--slow-rank", "0=nan"], "--slow-rank factor must be a positive finite number, not nan"),
        (["--slow-link", "1=inf"], "--slow-link factor must be a positive finite number, not inf"),
        (["--slow-rank", "0=1e300"], "exceed the 64-bit nanosecond clock"),
        (["--jitter", "nan"], "--jitter must be a spread (sigma) between 0 and 2, not nan"),
        (["--jitter", "100"], "between 0 and 2, not 100.0"),
        (["--hidden", "0"], "--hidden must be at least 1, not 0"),
        (["--seq", "-4"], "--seq must be at least 1, not -4"),
        (["--pp", "2", "--vp", "0"], "--vp must be at least 1, not 0"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_whatif_factors_and_sizes_no_trace_can_take_are_config_errors(
    trace: Path, args: list[str], message: str
) -> None:
    code, out = run(trace, *args, "--json")
    error = json.loads(out)["error"]
    assert code == 4 and error["type"] == "ConfigError" and message in error["message"], out


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--dp", "1000000"], "LUMOS_MAX_RANKS"),
        (["--layers", "1000000"], "LUMOS_MAX_LAYERS"),
        (["--layers", "4000"], "LUMOS_MAX_NODES"),  # under a limit of 10,000 nodes
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_whatif_edit_past_a_limit_is_refused_before_copying(
    trace: Path, args: list[str], names: str
) -> None:
    """Were: minutes of copying nodes (stopped at 90 s in the red-team run)."""
    began = time.process_time()
    code, out = run(trace, *args, env={"LUMOS_MAX_NODES": "10000"})
    assert code == 7 and names in out, out
    assert time.process_time() - began < 5


def test_whatif_jitter_within_its_band_still_runs(trace: Path) -> None:
    code, out = run(trace, "--jitter", "0.3", "--slow-rank", "1=2.5", "--json")
    assert code == 0, out
    edits = json.loads(out)["result"]["edits"]
    assert "rank 1 compute x2.5" in edits and "kernel jitter sigma 0.3 (seed 0)" in edits


@pytest.mark.parametrize("flag", ["--hidden", "--ffn", "--seq"])
def test_whatif_width_past_the_limit_is_refused_naming_the_flag(trace: Path, flag: str) -> None:
    """Round 3: `--hidden` / `--seq` 10^12 ended in `internal error: ValueError: Value out of
    range` (exit 70: a rescaled duration past 64 bits); `--ffn` 10^12 simulated a step of
    days (exit 0)."""
    code, out = run(trace, flag, str(10**12), "--json")
    error = json.loads(out)["error"]
    assert code == 7 and error["message"].startswith(f"{flag} is 1,000,000,000,000"), out
    assert "LUMOS_MAX_WIDTH" in error["message"]


def test_whatif_widths_under_the_limit_that_overflow_together_name_the_node(
    trace: Path,
) -> None:
    """Each at 2^24 passes the limit; together they rescale a GEMM past 64-bit ns: exit 4
    naming the node, not exit 70."""
    width = str(1 << 24)
    code, out = run(trace, "--hidden", width, "--ffn", width, "--seq", width, "--json")
    error = json.loads(out)["error"]
    assert code == 4 and error["type"] == "ConfigError", out
    assert (
        "past the 64-bit nanosecond clock" in error["message"]
        and "the edit makes node" in (error["message"])
    )
