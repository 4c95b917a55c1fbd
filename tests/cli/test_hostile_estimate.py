"""Hostile and unusual inputs to `lumos estimate` and its Python API: one clear error each.

The third audit (trace-free side) found plans Megatron-Core cannot run estimated as if
it could (TP past the key/value heads, `--gpus` other than the plan's world printed as
the cluster), plan fields of the wrong type compared, truncated or taken as true through
`lumos.estimate`, hardware rates that overflow the clock ending in `OverflowError`
(exit 70), config files that are folders or devices called missing, a 34 MB model file
parsed for 84 CPU s and 3.2 GB, a GPU name read as a file path, YAML names driving the
terminal, `-o ''` writing into the working folder, and the suggested `lumos simulate`
command built from `-o` unquoted. Each test is named after its pattern.
"""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import lumos
from lumos.cli.main import cli
from lumos.errors import ConfigError, OutputError
from tests.conftest import REPO

HW = REPO / "hwconfigs"
MODEL = "llama3.1-8b"  # 32 heads, 8 key/value heads, 32 layers


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def system(tmp_path: Path, name: str = "hw.yaml", **changes: Any) -> str:
    """The shipped h100 system inlined into one YAML, with `changes` as `part.key: value`
    (part: gpu, node, nvlink, fabric)."""
    gpu = yaml.safe_load((HW / "gpus" / "h100_sxm.yaml").read_text())
    node = yaml.safe_load((HW / "nodes" / "hgx_h100.yaml").read_text())
    fabric = yaml.safe_load((HW / "fabrics" / "ndr_rail_fat_tree.yaml").read_text())
    parts = {"gpu": gpu, "node": node, "nvlink": node["nvlink"], "fabric": fabric}
    for dotted, value in changes.items():
        part, key = dotted.split("__")
        parts[part][key] = value
    node["gpu"] = gpu
    text = yaml.safe_dump({"name": "x", "node": node, "fabric": fabric, "num_nodes": 1})
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# --- plans that do not divide -------------------------------------------------------------


def test_tp_that_does_not_divide_the_kv_heads_is_refused() -> None:
    """Was: TP 16 over 8 key/value heads estimated (each rank given one whole KV head, as
    no training framework does: Megatron-Core's `divide(num_query_groups, tp)` asserts)."""
    code, out = run("estimate", "--model", MODEL, "--tp", "16")
    assert code == 4 and "must divide the 8 key/value heads" in out, out


def test_gpus_other_than_the_plans_world_is_refused() -> None:
    """Was: `--tp 8 --gpus 64` printed "on 64 x h100" for an 8-GPU estimate."""
    code, out = run("estimate", "--model", MODEL, "--tp", "8", "--gpus", "64")
    assert code == 4 and "--gpus is 64 but the plan runs on tp x pp x dp x cp = 8" in out
    code, out = run("estimate", "--model", MODEL, "--tp", "8", "--gpus", "8")
    assert code == 0 and "on 8 x h100" in out


def test_layers_that_do_not_divide_over_pp_are_stated_with_the_split_used() -> None:
    """Was: 32 layers over PP 5 estimated without a word (7, 7, 6, 6, 6: a split
    Megatron-Core refuses). The estimate still runs (published rows rely on it), saying so."""
    code, out = run("estimate", "--model", MODEL, "--pp", "5")
    assert code == 0
    assert "note: 32 layers do not divide over pp x vp = 5 model chunks" in out
    assert "7 on chunks 0-1 and 6 on the others" in out
    code, out = run("estimate", "--model", MODEL, "--pp", "4")
    assert "do not divide" not in out


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ({"tp": "8"}, "tp must be an integer, got '8'"),
        ({"tp": 8.0}, "tp must be an integer, got 8.0"),
        ({"tp": True, "dp": 2}, "tp must be an integer, got True"),
        ({"pp": 2, "vp": 2.5}, "vp must be an integer"),
        ({"zero": True}, "zero must be an integer"),
        ({"sequence_parallel": "no"}, "sequence_parallel must be true or false"),
        ({"gbs": 0}, "gbs must be >= 1"),
        ({"seq": 0}, "seq must be >= 1"),
        ({"ep": 0}, "ep must be >= 1"),
        ({"etp": -1}, "etp must be >= 0"),
        ({"gpus": True}, "--gpus must be an integer"),
        ({"dp": None}, "dp must be an integer, got None"),
        ({"mbs": "2"}, "mbs must be an integer"),
    ],
    ids=lambda v: str(v)[:30],
)
def test_plan_fields_of_the_wrong_type_are_config_errors(
    plan: dict[str, Any], message: str
) -> None:
    """Were: TypeError / ZeroDivisionError tracebacks (`tp="8"`, `tp=8.0`, `ep=0`), or
    silently wrong (`tp=True` as 1, `sequence_parallel="no"` as true, `gbs=0` / `seq=0`
    replaced by the defaults, `etp=-1` kept)."""
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        lumos.estimate(MODEL, **plan)


def test_numpy_integers_are_whole_numbers() -> None:
    import numpy as np

    assert lumos.estimate(MODEL, tp=np.int64(8)).plan.tp == 8


# --- hardware -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"gpu__peak_bf16_tflops": 1e-300},
        {"nvlink__bandwidth_gbps": 1e-300},
        {"nvlink__latency_ns": 1e300},
        {"fabric__nic_line_rate_gbit_per_s": 1e-300},
        {"node__collective_launch_ns": 1e300},
        {"gpu__hbm_bandwidth_gbps": 1e-12},
    ],
    ids=lambda c: next(iter(c)),
)
def test_hardware_rates_that_overflow_the_clock_are_one_error(
    tmp_path: Path, change: dict[str, float]
) -> None:
    """Were: `internal error: OverflowError` (exit 70) for rates of 1e-300 and latencies of
    1e300; an HBM bandwidth of 1e-12 blamed the plan's sizes. Now refused when the config
    is read, naming the key: outside the band any real system's value is in."""
    hw = system(tmp_path, **change)
    code, out = run("estimate", "--model", MODEL, "--tp", "8", "--dp", "2", "--hw", hw)
    key = next(iter(change)).split("__")[1]
    assert code == 4 and key in out and "is it in other units?" in out, out


def test_yaml_exponent_without_a_point_is_explained(tmp_path: Path) -> None:
    """YAML 1.1 reads `1e3` as text: the error says so and how to write it."""
    hw = Path(system(tmp_path))
    hw.write_text(hw.read_text().replace("latency_ns: 600", "latency_ns: 1e3"))
    code, out = run("estimate", "--model", MODEL, "--hw", str(hw))
    assert code == 4 and "latency_ns" in out and "YAML reads it as text" in out, out


def test_config_that_is_a_folder_or_a_device_is_named(tmp_path: Path) -> None:
    """Was: "no such model spec file" for a folder and for /dev/zero."""
    (tmp_path / "m.yaml").mkdir()
    code, out = run("estimate", "--model", str(tmp_path / "m.yaml"))
    assert code == 4 and "is a folder, not a model spec file" in out, out
    code, out = run("estimate", "--model", "/dev/zero")
    assert code == 4 and "is a device, FIFO or socket" in out, out
    code, out = run("estimate", "--model", MODEL, "--hw", str(tmp_path / "m.yaml"))
    assert code == 4 and "is a folder, not a system config file" in out, out


def test_config_past_the_size_limit_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """Was: a 34 MB model file of keys parsed for 84 CPU s and 3.2 GB before its first
    unknown key was refused."""
    model = tmp_path / "big.yaml"
    model.write_text("layers: 4\n" + "".join(f"k{i}: {i}\n" for i in range(200_000)))
    began = time.process_time()
    code, out = run("estimate", "--model", str(model))
    assert code == 7 and "LUMOS_MAX_CONFIG_BYTES" in out, out
    assert time.process_time() - began < 2
    code, out = run("estimate", "--model", str(model), env={"LUMOS_MAX_CONFIG_BYTES": "1e7"})
    assert code == 4 and "more than 100,000 values" in out, out


def test_gpu_name_is_never_read_as_a_path(tmp_path: Path, monkeypatch: Any) -> None:
    """Was: a GPU named `mine.yaml` loaded `./mine.yaml` as its kernel physics (a name
    with `/` any file); a GPU without a table got a "did you mean 'h100_sxm'"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text((HW / "kernels" / "h100_sxm.yaml").read_text())
    for name in ("mine.yaml", "../kernels/h100_sxm", "/etc/passwd"):
        hw = system(tmp_path, gpu__name=name)
        code, out = run("estimate", "--model", MODEL, "--hw", hw)
        assert code == 4 and "has no kernel-physics table" in out, out
    code, out = run("estimate", "--model", MODEL, "--hw", "v100")
    assert code == 4 and "'v100_sxm2' has no kernel-physics table" in out
    assert "did you mean" not in out


def test_shipped_names_cannot_climb_out_of_their_folder(tmp_path: Path) -> None:
    """Was: `node: ../nodes/hgx_a100` (a shipped name, not a .yaml path) was read from
    hwconfigs/nodes/../nodes/."""
    hw = tmp_path / "hw.yaml"
    hw.write_text("name: x\nnode: ../nodes/hgx_h100\nfabric: ndr_rail_fat_tree\nnum_nodes: 1\n")
    code, out = run("estimate", "--model", MODEL, "--hw", str(hw))
    assert code == 4 and "no shipped node config '../nodes/hgx_h100'" in out, out


def test_fp8_on_a_gpu_without_fp8_and_unknown_systems_are_refused() -> None:
    code, out = run("estimate", "--model", MODEL, "--precision", "fp8", "--hw", "a100")
    assert code == 4 and "a100_sxm_80gb has no FP8 tensor cores" in out
    code, out = run("estimate", "--model", MODEL, "--hw", "b200")
    assert code == 2 and "unknown system 'b200'; shipped: a100, a800, h100" in out


def test_a_plan_that_does_not_fit_is_flagged_with_its_figure() -> None:
    code, out = run("estimate", "--model", "gpt3-175b")
    assert code == 0 and "DOES NOT FIT in 86 GB" in out and "2879.4 GB" in out
    code, out = run("estimate", "--model", "gpt3-175b", "--json")
    doc = json.loads(out)["result"]
    assert doc["fits_in_memory"] is False and doc["memory_gb_per_gpu"] > 2000


# --- names and paths ----------------------------------------------------------------------


def test_model_and_hardware_names_cannot_drive_the_terminal(tmp_path: Path) -> None:
    """Was: a model `name` with OSC 52 (write the clipboard) and a system `name` with ESC
    and a bidi override reached the terminal raw in the header line."""
    model = tmp_path / "m.yaml"
    hostile = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\u202e"
    model.write_text(json.dumps({"name": hostile, "layers": 2, "hidden": 256, "heads": 8,
                                 "vocab": 1024}))  # fmt: skip
    hw = system(tmp_path, gpu__name="h100_sxm")
    text = Path(hw).read_text().replace("name: x", 'name: "\\e[31mEVIL\\u202e"')
    Path(hw).write_text(text)
    code, out = run("estimate", "--model", str(model), "--hw", hw)
    assert code == 0 and "\x1b" not in out and "\u202e" not in out, out
    assert "\\x1b]52;c;" in out


def test_suggested_command_is_shell_quoted(tmp_path: Path) -> None:
    """Was: "`lumos simulate a b;touch x --hw ...`": a command built from -o unquoted, for
    the user to paste into a shell."""
    out_dir = tmp_path / "a b;touch x"
    code, out = run("estimate", "--model", MODEL, "--tp", "8", "-o", str(out_dir))
    assert code == 0 and f"`lumos simulate '{out_dir}' --hw h100 --allow-partial`" in out


def test_empty_output_path_writes_nothing(tmp_path: Path, monkeypatch: Any) -> None:
    """Was: `-o ''` wrote estimate.0.et into the working folder (Path('') is '.')."""
    monkeypatch.chdir(tmp_path)
    code, out = run("estimate", "--model", MODEL, "-o", "")
    assert code == 2 and "empty folder name" in out
    with pytest.raises(OutputError, match="empty path"):
        lumos.estimate(MODEL, output="")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("how", [["--exact"], ["-o", "ets"]], ids=["exact", "output"])
def test_a_step_too_big_to_simulate_whole_is_a_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: list[str]
) -> None:
    """Was: 65,536 micro-batches simulated whole (`--exact`, or `-o` which writes them):
    18.7 million nodes, `internal error: MemoryError` at 3.5 GB (uncapped: more). The
    nodes are counted from one block per chunk before any rank is built."""
    monkeypatch.chdir(tmp_path)
    began = time.process_time()
    code, out = run("estimate", "--model", "gpt3-125m", "--gbs", "65536", *how)
    assert code == 7 and "nodes of the step simulated whole is 18,743,296" in out, out
    assert "LUMOS_MAX_NODES" in out and time.process_time() - began < 2
    assert list(tmp_path.iterdir()) == []
    code, out = run("estimate", "--model", "gpt3-125m", "--gbs", "65536")  # sampled: fine
    assert code == 0


def test_all_ranks_past_the_written_nodes_limit_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: `-o --all-ranks` of 131,072 ranks (149 million nodes, ~18 GB on disk): exit 70,
    MemoryError at 3.8 GB after 22 CPU s. Checked from the distinct ranks before any is
    built."""
    monkeypatch.chdir(tmp_path)
    args = ["--tp", "8", "--dp", "16384", "--gbs", "16384", "-o", "ets", "--all-ranks"]
    began = time.process_time()
    code, out = run("estimate", "--model", MODEL, *args)
    assert code == 7 and "nodes of all 131072 ranks' ETs is 149,159,936" in out, out
    assert "LUMOS_MAX_ET_NODES" in out and time.process_time() - began < 2
    assert list(tmp_path.iterdir()) == []


def test_thousands_of_pipeline_stages_cost_no_name_table_each(tmp_path: Path) -> None:
    """Was: 16,000 layers on PP 1,000: 50 CPU s and 3.4 GB (each stage's graph copied the
    400,000-name table, and a cut-short check read all of it per rank); PP 4,000 a
    MemoryError at 4 GB. The table is shared and only the names in use are read."""
    model = tmp_path / "deep.yaml"
    model.write_text("layers: 16000\nhidden: 256\nheads: 8\nffn: 512\nvocab: 1024\nseq: 128\n")
    began = time.process_time()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code, out = run("estimate", "--model", str(model), "--pp", "1000")
    assert code == 0, out
    assert time.process_time() - began < 20
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 1_000_000  # KiB
