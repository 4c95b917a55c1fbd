"""Plans and models lumos used to price as something else, without a word (red-team round
on `lumos estimate`): each is now refused naming the setting, and its valid neighbour
still runs.

* seq / cp not divisible by tp under sequence parallelism: the token shard was rounded
  down (seq 1001 on TP 2 priced 500 tokens a rank); Megatron-Core asserts instead;
* a sliding window under context parallelism: the ring was priced over the whole causal
  sequence, the window ignored (GPT-OSS's 128-key window at seq 8192 on CP 2), while the
  MFU numerator counted the window;
* packed documents longer than the sequence: priced as unpacked, the header saying
  "packed documents of 100000 tokens";
* a mixture of experts whose `first_dense` covers every layer: estimated as a dense model
  with the MoE notes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.api import estimate
from lumos.cli.main import cli
from lumos.errors import ConfigError

MODEL = "llama3.1-8b"


def test_seq_that_sequence_parallelism_cannot_split_over_tp_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"splits each CP rank's 1001 tokens .* over tp 2"):
        estimate(MODEL, tp=2, seq=1001)
    with pytest.raises(ConfigError, match=r"4098 tokens \(seq / cp\) over tp 8"):
        estimate(MODEL, tp=8, cp=2, seq=8196)
    assert estimate(MODEL, tp=2, seq=1001, sequence_parallel=False).plan.seq == 1001
    assert estimate(MODEL, tp=8, cp=2, seq=8192).plan.seq == 8192


def test_seq_refusal_from_the_cli_names_the_way_out() -> None:
    result = CliRunner().invoke(cli, ["estimate", "--model", MODEL, "--tp", "8", "--seq", "4097"])
    assert result.exit_code == 4 and "or --no-sp" in result.output, result.output


def test_sliding_window_with_context_parallelism_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"gpt-oss-20b's sliding window \(128 keys < seq 8192\)"):
        estimate("gpt-oss-20b", cp=2, seq=8192)
    # a window as long as the sequence is full causal attention, which the ring prices
    assert estimate("mistral-7b", cp=2, seq=4096).plan.cp == 2


def test_packed_documents_longer_than_the_sequence_are_refused() -> None:
    with pytest.raises(ConfigError, match="packed_doc_len 100000 is longer than seq 8192"):
        estimate(MODEL, packed_doc_len=100_000)
    assert estimate(MODEL, packed_doc_len=8192).plan.packed_doc_len == 8192


def test_experts_that_no_layer_holds_are_refused(tmp_path: Path) -> None:
    spec = tmp_path / "m.yaml"
    base = "layers: 4\nhidden: 512\nheads: 8\nvocab: 1000\nexperts: 8\ntop_k: 2\n"
    spec.write_text(base + "first_dense: 4\n")
    with pytest.raises(ConfigError, match=r"m\.yaml: 8 experts but no layer holds them"):
        estimate(spec)
    spec.write_text(base + "first_dense: 3\n")
    assert estimate(spec, seq=1024).iteration_time_s > 0
