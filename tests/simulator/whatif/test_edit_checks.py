"""What-if edits no trace can take are refused before any edit runs (`whatif.checks`).

The red-team round found a NaN straggler factor or jitter ending in `internal error:
ValueError` (exit 70), a 1e300 factor overflowing the ETs' 64-bit durations (exit 70), a
jitter spread of 100 accepted (every kernel then ~0 ns: a faster step, not a jittered
one), and `--dp 1000000` / `--layers 1000000` copying nodes for minutes with no limit.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.errors import ConfigError, ResourceLimitError
from lumos.simulator.whatif.api import WhatIf, run_whatif
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
    ("spec", "message"),
    [
        (WhatIf(jitter=math.nan), "--jitter must be a spread (sigma) between 0 and 2, not nan"),
        (WhatIf(jitter=100.0), "between 0 and 2, not 100.0"),
        (WhatIf(hidden=0), "--hidden must be at least 1, not 0"),
        (WhatIf(seq=-4), "--seq must be at least 1, not -4"),
        (WhatIf(pp=2, vp=0), "--vp must be at least 1, not 0"),
    ],
    ids=["jitter-nan", "jitter-100", "hidden-0", "seq-negative", "vp-0"],
)
def test_whatif_sizes_no_trace_can_take_are_config_errors_in_the_library(
    trace: Path, spec: WhatIf, message: str
) -> None:
    """What the CLI refuses as a usage error (below) the library refuses as ConfigError."""
    with pytest.raises(ConfigError) as caught:
        run_whatif(trace, spec)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--jitter", "nan"], "'--jitter': nan is not a finite number"),
        (["--jitter", "100"], "'--jitter': 100.0 is not in the range 0.0<=x<=2.0"),
        (["--hidden", "0"], "'--hidden': 0 is not in the range 1<=x<=16,777,216"),
        (["--seq", "-4"], "'--seq': -4 is not in the range 1<=x<=16,777,216"),
        (["--pp", "2", "--vp", "0"], "'--vp': 0 is not in the range 1<=x<=16,384"),
        (
            ["--dp", "1000000"],
            "'--dp': 1,000,000 is above 131,072, the most lumos takes (LUMOS_MAX_RANKS",
        ),
        (
            ["--layers", "1000000"],
            "'--layers': 1,000,000 is above 16,384, the most lumos takes (LUMOS_MAX_LAYERS",
        ),
        (
            ["--microbatches", str(10**12)],
            "above 1,048,576, the most lumos takes (LUMOS_MAX_MICROBATCHES",
        ),
        (["--seed", "-1", "--jitter", "0.3"], "'--seed': -1 is not in the range 0<=x<="),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_whatif_flags_out_of_their_range_are_usage_errors_naming_the_bound(
    trace: Path, args: list[str], message: str
) -> None:
    """Round 4: were exit 4 or 7 after the trace's load (8-11 s under load), `--seed -1
    --jitter 0.3` exit 70 (numpy's `ValueError: expected non-negative integer`); now exit 2 from the flag, naming it and its bound."""
    code, out = run(trace, *args, "--json")
    error = json.loads(out)["error"]
    assert code == 2 and message in error["message"], out


@pytest.mark.parametrize(
    ("args", "names"),
    [
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
    assert code == 2 and f"'{flag}': 1,000,000,000,000 is above 16,777,216" in error["message"]
    assert "LUMOS_MAX_WIDTH" in error["message"]  # round 4: exit 7 -> 2, naming the flag
    with pytest.raises(ResourceLimitError, match=f"{flag} is 1,000,000,000,000"):
        run_whatif(trace, WhatIf(**{flag[2:]: 10**12}))  # the library: a limit, as before


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
    # round 4: the message named the node alone, not its trace; now file and rank first
    assert error["message"].startswith(f"{trace / 'whatif.0.et'}: rank 0 (and 1 more rank(s)")
