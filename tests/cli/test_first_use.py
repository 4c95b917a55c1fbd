"""First use: answers that cannot be misread, one spelling per option, -v/-q anywhere.

Runs the real CLI on the bundled 2-rank DDP capture (tests/data/captures): host ETs
and Kineto traces as PyTorch wrote them.
"""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from tests.conftest import DATA

CAPTURES = DATA / "captures"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def ddp_et(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ddp") / "et"
    code, output = run("convert", str(CAPTURES / "ddp"), "-o", str(out))
    assert code == 0, output
    return out


def test_host_et_only_replay_is_refused_not_zero(tmp_path: Path) -> None:
    out = tmp_path / "host"
    code, output = run("convert", str(CAPTURES / "ddp" / "rank0.host_et.json.gz"), "-o", str(out))
    assert code == 0 and "carry no measured durations" in output, output
    code, output = run("simulate", str(out))
    assert code == 5
    assert "no measured duration" in output and "--hw" in output
    assert "0 ns" in output and "Simulated step" not in output
    code, output = run("simulate", str(out), "--hw", "h100", "--json")
    assert code == 0, output
    data = orjson.loads(output)["result"]
    assert data["iteration_time_ns"] > 1_000_000  # 1 ms at least: real work was priced
    assert any("priced by the cost model for h100_sxm" in n for n in data["notes"])


def test_host_ets_and_kineto_of_different_runs_are_refused(tmp_path: Path) -> None:
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for rank in (0, 1):
        (mixed / f"rank{rank}.host_et.json.gz").write_bytes(
            (CAPTURES / "ddp" / f"rank{rank}.host_et.json.gz").read_bytes()
        )
        (mixed / f"rank{rank}.kineto.json.gz").write_bytes(
            (CAPTURES / "fsdp" / f"rank{rank}.kineto.json.gz").read_bytes()
        )
    out = tmp_path / "et"
    code, output = run("convert", str(mixed), "-o", str(out))
    assert code == 5
    assert "rank 0: only" in output and "different runs" in output and "50%" in output
    assert not list(out.glob("*.et")) if out.exists() else True
    code, output = run("convert", str(mixed), "-o", str(out), "--min-link-rate", "0")
    assert code == 0 and "linked" in output
    assert len(list(out.glob("trace.*.et"))) == 2


def test_matched_capture_links_above_threshold(ddp_et: Path) -> None:
    assert sorted(p.name for p in ddp_et.glob("*.et")) == ["trace.0.et", "trace.1.et"]


def test_hw_says_communication_only_was_repriced(ddp_et: Path) -> None:
    for hw in ("h100", "V100"):
        code, output = run("simulate", str(ddp_et), "--hw", hw, "--json")
        assert code == 0, output
        data = orjson.loads(output)["result"]
        assert data["mode"] == "model"
        assert any("compute durations are kept" in n for n in data["notes"]), data["notes"]
    code, output = run("simulate", str(ddp_et), "--hw", "h100")
    assert code == 0 and "note: communication re-priced" in output


def test_compare_names_its_overall_row(ddp_et: Path) -> None:
    # aligned or not, the overall row is the slowest rank on each side (issue 9: never
    # the span from the first start to the last end, which adds the entry skew)
    code, output = run("compare", str(ddp_et))
    assert code == 0 and "slowest rank" in output and "span" not in output
    assert "max" not in output
    code, output = run("compare", str(ddp_et), "--no-align-ranks")
    assert code == 0 and "slowest rank" in output
    code, output = run("compare", str(ddp_et), "--no-align-ranks", "--json")
    assert orjson.loads(output)["result"]["overall"] == "slowest_rank"


def test_wrong_hw_is_one_line_listing_the_shipped_systems(ddp_et: Path) -> None:
    code, output = run("simulate", str(ddp_et), "--hw", "b200")
    assert code == 2
    assert "unknown system 'b200'" in output and "a100, a800, h100" in output
    assert output.count("\n") == 1 and output.startswith("error: ")


def test_hw_list_and_show() -> None:
    code, output = run("hw", "list")
    assert code == 0 and "h100" in output and "v100" in output
    code, output = run("hw", "show", "A100", "--json")
    assert code == 0 and orjson.loads(output)["result"]["node"]["gpu"]["name"] == "a100_sxm_80gb"


def test_convert_refuses_chakra_ets_and_simulate_refuses_raw_traces(ddp_et: Path) -> None:
    code, output = run("convert", str(ddp_et / "trace.0.et"), "-o", "unused")
    assert code == 3 and "already converted" in output and "lumos simulate" in output
    code, output = run("simulate", str(CAPTURES / "ddp"))
    assert code == 3 and "run `lumos convert`" in output
    code, output = run("simulate", str(CAPTURES / "ddp" / "rank0.kineto.json.gz"))
    assert code == 3 and "run `lumos convert`" in output


def test_one_overwrite_rule_and_missing_folders(ddp_et: Path, tmp_path: Path) -> None:
    timeline = tmp_path / "t.json"
    assert run("simulate", str(ddp_et), "--timeline", str(timeline))[0] == 0
    code, output = run("simulate", str(ddp_et), "--timeline", str(timeline))
    assert code == 5 and "pass --force" in output
    assert run("simulate", str(ddp_et), "--timeline", str(timeline), "--force")[0] == 0
    code, output = run("simulate", str(ddp_et), "--timeline", str(tmp_path / "no" / "t.json"))
    assert code == 5 and "does not exist" in output
    code, output = run("convert", str(CAPTURES / "ddp"), "-o", str(ddp_et))
    assert code == 5 and "--force" in output


def test_old_spellings_still_work_but_are_not_shown(tmp_path: Path) -> None:
    code, output = run("convert", "--help")
    assert "-o, --output" in output and "--out " not in output
    out = tmp_path / "et"
    code, output = run("convert", str(CAPTURES / "ddp"), "--out", str(out))
    assert code == 0, output
    code, output = run("simulate", "--help")
    assert "--comm-groups" in output and "--comm-group " not in output


def test_verbose_and_quiet_anywhere_on_the_line(
    ddp_et: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for args in (["-v", "simulate", str(ddp_et)], ["simulate", str(ddp_et), "-v"]):
        run(*args)
        assert logging.getLogger("lumos").level == logging.INFO
    code, output = run("simulate", str(ddp_et), "--hw", "h100", "-q")
    assert code == 0 and "note:" not in output
    assert logging.getLogger("lumos").level == logging.ERROR
    run("et", "info", str(ddp_et), "-vv")
    assert logging.getLogger("lumos").level == logging.DEBUG


def test_help_lists_exit_codes_and_completion() -> None:
    code, output = run("--help")
    assert code == 0 and "Exit codes" in output and "_LUMOS_COMPLETE" in output
    code, output = run("simulate", "--help")
    assert code == 0 and "h100-roce" in output  # every shipped system is named in --hw's help


def test_piped_tables_keep_every_cell_whole(ddp_et: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # piped output (not a terminal) used to be cut to 80 columns: "expos…", "GPU-i…"
    monkeypatch.delenv("COLUMNS", raising=False)
    code, output = run("simulate", str(ddp_et))
    assert code == 0, output
    assert "…" not in output
    assert "exposed compute" in output and "GPU-inclusive" in output
