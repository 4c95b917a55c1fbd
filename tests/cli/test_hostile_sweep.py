"""Hostile and unusual inputs to `lumos sweep`: bounded, refused by name, never a traceback.

The third audit found a grid of 200 x 200 x 200 values built as a list (24 million
points: 2.9 GB and 20 CPU s; 2000 per axis: MemoryError), `--workers` unbounded,
`--seq 1024,2048` silently swept at 1024 only, a grid without one valid plan ending with
exit 0 and an empty table (`--zero 2` reported as "zero must be N, N or N"), a CSV the
user had there overwritten without `--force`, `-o ''` an internal error, `--top -5`
hiding the last five rows, hostile journal lines tracebacks, and one plan past a limit
ending the whole sweep. Each test is named after its pattern.
"""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli

MODEL = "llama3.1-8b"
JOB = ["--model", MODEL, "--gpus", "8", "--seq", "8192", "--pp", "1"]
SMALL = [*JOB, "--gbs", "8"]
ONE = [*SMALL, "--mbs", "1", "--recompute", "none", "--tp", "8"]


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["sweep", *args], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def test_grid_past_the_limit_is_refused_before_it_is_built(tmp_path: Path) -> None:
    """Was: 24 million points enumerated from a list (2.9 GB, 20 CPU s)."""
    values = ",".join(str(i) for i in range(1, 201))
    began = time.process_time()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code, out = run(*SMALL, "--tp", values, "--pp", values, "--mbs", values,
                    "-o", str(tmp_path / "t.csv"))  # fmt: skip
    assert code == 7 and "LUMOS_MAX_SWEEP_POINTS" in out, out
    assert "tp 200 x pp 200 x cp 1 x vp 1 x mbs 200" in out and "24,000,000" in out
    assert time.process_time() - began < 2
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 200_000  # KiB
    assert not (tmp_path / "t.csv").exists()


def test_repeated_axis_values_count_once(tmp_path: Path) -> None:
    code, out = run(*SMALL, "--tp", "8,8,8", "--mbs", "1,1", "--recompute", "none,none",
                    "-o", str(tmp_path / "t.csv"), "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["result"]["grid_points"] == 1


def test_a_plan_sweep_takes_one_sequence_length(tmp_path: Path) -> None:
    code, out = run(*ONE, "--seq", "1024,2048", "-o", str(tmp_path / "t.csv"))
    assert code == 4 and "a plan sweep takes one sequence length" in out, out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tp", "3"], "none of the 1 grid points is a valid plan"),
        (["--zero", "4"], "--zero takes stages 0, 1, 2 and 3, got [4]"),
    ],
    ids=["tp3", "zero4"],
)
def test_a_grid_without_one_valid_plan_is_an_error(
    tmp_path: Path, args: list[str], message: str
) -> None:
    """Were: exit 0, an empty table, and "zero must be N, N or N, got N"."""
    code, out = run(*ONE, *args, "-o", str(tmp_path / "t.csv"))
    assert code == 4 and message in out, out
    assert not (tmp_path / "t.csv").exists()


def test_a_plan_past_a_limit_is_rejected_not_fatal(tmp_path: Path) -> None:
    """Was: the first plan past `LUMOS_MAX_MICROBATCHES` (DP 1) ended the whole sweep,
    though DP 8 plans are within it."""
    code, out = run(*JOB, "--gbs", "64", "--tp", "1,8", "--mbs", "1", "--recompute",
                    "none", "-o", str(tmp_path / "t.csv"), "--json",
                    env={"LUMOS_MAX_MICROBATCHES": "16"})  # fmt: skip
    assert code == 0, out
    doc = json.loads(out)["result"]
    assert doc["valid_plans"] == 1 and any("LUMOS_MAX_MICROBATCHES" in k for k in doc["rejected"])


def test_a_table_no_sweep_wrote_is_replaced_only_with_force(tmp_path: Path) -> None:
    """Was: the user's own results.csv overwritten by the sweep's table, no question."""
    table = tmp_path / "results.csv"
    table.write_text("mine\n")
    code, out = run(*ONE, "-o", str(table))
    assert code == 5 and "no sweep wrote it; pass --force" in out, out
    assert table.read_text() == "mine\n"
    code, out = run(*ONE, "-o", str(table), "--force")
    assert code == 0 and table.read_text() != "mine\n"
    code, out = run(*ONE, "-o", str(table))  # its own table, journal beside it: resumes
    assert code == 0 and "resumed 1" in out


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["-o", ""], 2, "empty path"),
        (["-o", "t.csv", "--plot", ""], 2, "empty path"),
        (["-o", "t.csv", "--top", "-5"], 2, "--top"),
        # round 4: the flags' own bounds (exit 2 naming them; were exit 7 from the run)
        (["-o", "t.csv", "--workers", "100000"], 2, "'--workers': 100,000 is above 128"),
        (["-o", "t.csv", "--gpus", "1000000000"], 2, "(LUMOS_MAX_RANKS; raise it"),
    ],
    ids=["empty-o", "empty-plot", "top", "workers", "gpus"],
)
def test_option_values_out_of_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], code: int, message: str
) -> None:
    """Were: `-o ''` internal error (ValueError), `--plot ''` no plot without a word,
    `--top -5` all rows but the last five, `--workers 100000` as many processes as
    points, `--gpus 1e9` every plan rejected and exit 0."""
    monkeypatch.chdir(tmp_path)
    got, out = run(*ONE, *args)
    assert got == code and message in out, out
    assert not (tmp_path / "t.csv").exists()


@pytest.mark.parametrize(
    ("journal", "message"),
    [
        ("[1, 2]\n", "not a lumos sweep journal"),
        ("5\n", "not a lumos sweep journal"),
        ('{"kind": "lumos-sweep-journal"}\n', "for another sweep"),
        (None, "a journal line without a plan key"),
    ],
    ids=["list", "number", "other-space", "row"],
)
def test_hostile_journal_lines_are_config_errors(
    tmp_path: Path, journal: str | None, message: str
) -> None:
    """Were: AttributeError / TypeError tracebacks on a journal line that is not an
    object, or an object without a key."""
    table = tmp_path / "t.csv"
    if journal is None:
        assert run(*ONE, "-o", str(table))[0] == 0
        path = tmp_path / "t.csv.journal.jsonl"
        path.write_text(path.read_text().splitlines()[0] + "\n[5]\n")
    else:
        (tmp_path / "t.csv.journal.jsonl").write_text(journal)
    code, out = run(*ONE, "-o", str(table))
    assert code == 4 and message in out, out


def test_fp8_on_a_gpu_without_fp8_is_refused_before_any_plan_runs(tmp_path: Path) -> None:
    """Was: every plan an error row ("a100_sxm_80gb has no FP8 tensor cores"), exit 0."""
    code, out = run(*ONE, "--precision", "bf16,fp8", "--hw", "a100", "-o", str(tmp_path / "t"))
    assert code == 4 and "--precision fp8 on a100_sxm_80gb" in out, out


def test_plot_prefix_keeps_its_dots(tmp_path: Path) -> None:
    """Was: `--plot run.v2` wrote run.html (Path.with_suffix replaced ".v2")."""
    code, out = run(*ONE, "-o", str(tmp_path / "t.csv"), "--plot", str(tmp_path / "run.v2"))
    assert code == 0 and (tmp_path / "run.v2.html").exists(), out
    assert not (tmp_path / "run.html").exists()


@pytest.mark.parametrize(
    "change",
    [{"gpus": "8"}, {"gbs": 8.0}, {"seq": True}, {"tp": (1.5,)}, {"zero": ("1",)}],
    ids=lambda c: next(iter(c)),
)
def test_sweep_space_fields_of_the_wrong_type_are_config_errors(
    tmp_path: Path, change: dict[str, object]
) -> None:
    """Were: TypeError tracebacks through the Python API (`gpus="8"` compared with an int)."""
    from lumos.errors import ConfigError
    from lumos.simulator.sweep.runner import sweep
    from lumos.simulator.sweep.space import SweepSpace

    fields: dict[str, object] = {"model": MODEL, "gpus": 8, "gbs": 8, "seq": 8192} | change
    with pytest.raises(ConfigError, match=f"--{next(iter(change))}"):
        sweep(SweepSpace(**fields), tmp_path / "t.csv")  # type: ignore[arg-type]


def test_a_torchtitan_sweep_runs_fsdp_in_a_pipeline_on_its_kernels(tmp_path: Path) -> None:
    """`--framework` reaches every plan (and the table); ZeRO-3 with PP is FSDP2's, so a
    torchtitan job sweeps it and a Megatron one turns it away; plan-sweep only."""
    grid = ["--model", MODEL, "--gpus", "16", "--seq", "8192", "--gbs", "16", "--mbs", "1"]
    grid += ["--tp", "8", "--pp", "1,2", "--zero", "3", "--recompute", "full"]
    code, out = run(*grid, "--framework", "torchtitan", "-o", str(tmp_path / "t.csv"), "--json")
    assert code == 0, out
    result = json.loads(out)["result"]
    assert result["space"]["framework"] == "torchtitan"
    assert {(p["pp"], p["framework"]) for p in result["plans"]} == {
        (1, "torchtitan"),
        (2, "torchtitan"),
    }
    assert "framework" in (tmp_path / "t.csv").read_text().splitlines()[0].split(",")
    code, out = run(*grid, "-o", str(tmp_path / "m.csv"), "--json")
    assert code == 0 and [p["pp"] for p in json.loads(out)["result"]["plans"]] == [1]
    code, out = run("--from-trace", str(tmp_path), "--framework", "olmo-core",
                    "-o", str(tmp_path / "x.csv"))  # fmt: skip
    assert code == 4 and "--framework: plan-sweep options" in out, out
