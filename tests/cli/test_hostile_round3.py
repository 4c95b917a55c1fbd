"""Hostile input, round 3, at the CLI: link loops as inputs, `et info` on a set that is not
one, model and plan sizes past any real one, and `estimate --vocab-multiple`.

Before: a symlink loop given as the trace was click's "does not exist" (convert, whatif,
et to-json, export) or "no Chakra ET files found" (simulate, et info); `et info` on files
of two conversions printed totals over both and exited 0; a model with `hidden` 10^12 was
exit 5 "a FLOP or byte count ... exceeds 64 bits" naming no key, `vocab` / `ffn` 10^12 and
`experts` 10^9 were estimated (exit 0, a 30,749 s step), `--seq 10^12` exit 5;
`moe_ffn: 0` was read as "the dense FFN's width"; `--vocab-multiple` did not exist (the
plan field did).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import lumos
from lumos.cli.main import cli
from lumos.converters.chakra.files import find_et_sources
from lumos.errors import ResourceLimitError, TraceFormatError
from tests.converters.chakra.test_rank_sets import write_set


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    return result.exit_code, result.output


# --- a symbolic-link loop as the input ---------------------------------------------------


@pytest.fixture
def loop(tmp_path: Path) -> str:
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    return str(tmp_path / "a")


@pytest.mark.parametrize(
    "command",
    [
        ["simulate", "{in}"],
        ["compare", "{in}"],
        ["whatif", "{in}", "--dp", "2"],
        ["et", "info", "{in}"],
        ["et", "validate", "{in}"],
        ["et", "to-json", "{in}"],
        ["convert", "{in}", "-o", "{tmp}/out"],
        ["export", "astra-sim", "{in}", "-o", "{tmp}/bundle", "--hw", "h100"],
        ["export", "astra-sim-check", "{in}"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_symlink_loop_as_input_is_named_as_a_loop(
    tmp_path: Path, loop: str, command: list[str]
) -> None:
    code, out = run(*(a.replace("{in}", loop).replace("{tmp}", str(tmp_path)) for a in command))
    assert code == 2, out
    assert f"{loop}: a symbolic link loop" in out and "does not exist" not in out
    assert not (tmp_path / "out").exists() and not (tmp_path / "bundle").exists()


def test_symlink_loop_as_input_prints_the_json_envelope(loop: str) -> None:
    result = CliRunner().invoke(cli, ["simulate", loop, "--json"])
    envelope = json.loads(result.stdout)
    assert result.exit_code == 2 and envelope["error"]["exit_code"] == 2
    assert "symbolic link loop" in envelope["error"]["message"]


def test_symlink_loop_through_the_library_is_a_format_error(loop: str) -> None:
    with pytest.raises(TraceFormatError, match="a symbolic link loop"):
        find_et_sources(loop)


# --- et info on a set that is not one ----------------------------------------------------


def test_info_on_files_of_two_conversions_fails_like_validate(tmp_path: Path) -> None:
    """Decision: totals over files of two runs (or a rank mislabelled) describe no job, so
    `et info` exits 1 as `et validate` and `simulate` do; a set that only misses ranks is
    still described (exit 0) with a warning, in `--json` too (on stderr)."""
    folder = write_set(tmp_path / "mixed", 4, set_id="run-a")
    write_set(folder, 4, ranks=[2], set_id="run-b")
    for command in (["et", "info"], ["et", "validate"]):
        code, out = run(*command, str(folder))
        assert code == 1, out
        assert "files of 2 different conversions are mixed" in out
    result = CliRunner().invoke(cli, ["et", "info", str(folder), "--json"])
    assert result.exit_code == 1 and json.loads(result.stdout)["error"]["exit_code"] == 1
    mislabelled = write_set(tmp_path / "label", 2, meta_rank={1: 0})
    code, out = run("et", "info", str(mislabelled))
    assert code == 1 and "the file name says rank 1 but its metadata says rank 0" in out


def test_info_on_an_incomplete_set_still_describes_it_with_json_too(tmp_path: Path) -> None:
    folder = write_set(tmp_path / "part", 8, ranks=[0, 1, 2, 4, 5, 7])
    result = CliRunner().invoke(cli, ["et", "info", str(folder), "--json"])
    assert result.exit_code == 0
    assert len(json.loads(result.stdout)["result"]["traces"][0]["ranks"]) == 6
    assert "warning: 2 of 8 ranks are missing: 3, 6" in result.stderr


# --- model and plan sizes past any real model ---------------------------------------------

LLAMA = (
    "{layers: 4, hidden: 512, heads: 8, kv_heads: 8, ffn: 2048, vocab: 32000, mlp: swiglu, "
    "norm: rmsnorm, position: rope, seq: 1024%s}"
)
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 512,
    "intermediate_size": 2048,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "num_hidden_layers": 4,
    "vocab_size": 32000,
    "hidden_act": "silu",
}


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (LLAMA.replace("hidden: 512", "hidden: 1000000000000") % "", "hidden"),
        (LLAMA.replace("vocab: 32000", "vocab: 1000000000000") % "", "vocab"),
        (LLAMA.replace("ffn: 2048", "ffn: 1000000000000") % "", "ffn"),
        (LLAMA.replace("seq: 1024", "seq: 1000000000000") % "", "seq"),
        (LLAMA % ", experts: 1000000000, top_k: 2", "experts"),
        (LLAMA % ", experts: 8, top_k: 2, moe_ffn: 1000000000000", "moe_ffn"),
    ],
    ids=["hidden", "vocab", "ffn", "seq", "experts", "moe_ffn"],
)
def test_model_dimension_past_the_width_limit_names_the_key(
    tmp_path: Path, text: str, key: str
) -> None:
    path = tmp_path / "model.yaml"
    path.write_text(text)
    start = time.process_time()
    code, out = run("estimate", "--model", str(path))
    assert code == 7, out
    assert f"{path}: {key} is 1,000,000,000" in out and "LUMOS_MAX_WIDTH" in out
    assert time.process_time() - start < 5


@pytest.mark.parametrize(("key", "lumos_key"), [("hidden_size", "hidden"), ("vocab_size", "vocab")])
def test_config_json_dimension_past_the_width_limit_names_the_key(
    tmp_path: Path, key: str, lumos_key: str
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG | {key: 10**12}))
    code, out = run("estimate", "--model", str(path))
    assert code == 7 and f"config.json: {lumos_key} is 1,000,000,000,000" in out, out


def test_plan_seq_past_the_width_limit_is_a_limit() -> None:
    """--seq 10^12 was exit 5 from the 64-bit check deep in the step; the plan refuses it
    as a limit (exit 7), and since round 4 the flag itself is a usage error (exit 2)."""
    with pytest.raises(ResourceLimitError, match="plan: seq is 1,000,000,000,000"):
        lumos.estimate("gpt3-125m", seq=10**12)
    code, out = run("estimate", "--model", "gpt3-125m", "--seq", str(10**12))
    assert code == 2 and "'--seq': 1,000,000,000,000 is above 16,777,216" in out, out


def test_widths_at_the_limit_estimate_quickly(tmp_path: Path) -> None:
    """The bound refuses nothing real: a 2^24 vocabulary still estimates, in seconds."""
    path = tmp_path / "model.yaml"
    path.write_text(LLAMA.replace("vocab: 32000", f"vocab: {1 << 24}") % "")
    code, out = run("estimate", "--model", str(path), "--json")
    assert code == 0, out
    assert json.loads(out)["result"]["iteration_time_s"] > 0


def test_moe_ffn_zero_given_is_refused_not_the_dense_width(tmp_path: Path) -> None:
    path = tmp_path / "model.yaml"
    path.write_text(LLAMA % ", experts: 8, top_k: 2, moe_ffn: 0")
    code, out = run("estimate", "--model", str(path))
    assert code == 4 and "moe_ffn must be a positive integer (one expert's FFN width), got 0" in out
    path.write_text(LLAMA % ", experts: 8, top_k: 2")  # not given: the dense ffn, as before
    assert run("estimate", "--model", str(path))[0] == 0


# --- estimate --vocab-multiple ------------------------------------------------------------


def _step(*more: str) -> dict:
    code, out = run("estimate", "--model", "llama3-8b", "--tp", "8", "--json", *more)
    assert code == 0, out
    return json.loads(out)["result"]


def test_vocab_multiple_flag_sets_the_plans_padding() -> None:
    """Megatron pads Llama 3's 128,256 rows to 129,024 at TP 8; --vocab-multiple 1 builds
    128,256 (16,032 a rank), as the API's `vocab_multiple=1` does."""
    padded, unpadded = _step(), _step("--vocab-multiple", "1")
    assert unpadded["plan"]["vocab_multiple"] == 1 and padded["plan"]["vocab_multiple"] == 0
    assert unpadded["iteration_time_s"] < padded["iteration_time_s"]
    assert not any("vocabulary padded" in a for a in unpadded["assumptions"])
    assert any("128,256 -> 129,024" in a for a in padded["assumptions"])
    api = lumos.estimate("llama3-8b", tp=8, vocab_multiple=1)
    assert api.iteration_time_s == pytest.approx(unpadded["iteration_time_s"], abs=1e-6)
    code, out = run("estimate", "--model", "llama3-8b", "--tp", "8", "--vocab-multiple", "1")
    assert code == 0 and "recompute none, vocab multiple 1" in out


@pytest.mark.parametrize(
    ("value", "code", "message"),
    [
        ("200000", 4, "vocab_multiple must be 0 (the framework's) to the vocabulary (128256)"),
        ("-1", 2, "-1 is not in the range 0<=x<=16,777,216"),
        ("1.5", 2, "'1.5' is not a valid integer"),
    ],
)
def test_vocab_multiple_out_of_range_is_refused(value: str, code: int, message: str) -> None:
    got, out = run("estimate", "--model", "llama3-8b", "--vocab-multiple", value)
    assert got == code and message in out, out
