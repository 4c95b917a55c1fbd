"""Packed sequences (`packed_doc_len`, NeMo's `packed_sequence` SFT): attention within each
document, priced over the band of keys a query sees; the rest of the layer unchanged."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.errors import ConfigError
from lumos.simulator.workload import ParallelPlan, estimate
from lumos.simulator.workload.attention import band
from lumos.simulator.workload.dims import Ctx
from lumos.simulator.workload.spec import load_model
from tests.simulator.workload.passes import node_value, stage0_pass
from tests.simulator.workload.test_framework import KM

MODEL = load_model("llama3-8b")
PLAN = ParallelPlan(tp=1, dp=1, mbs=1, gbs=1, seq=4096, zero=0)


def _ctx(plan: ParallelPlan) -> Ctx:
    return Ctx.make(MODEL, plan, KM)


def test_a_query_sees_the_keys_of_its_own_document() -> None:
    """Documents of L tokens: (L + 1) / 2 keys a query on average; a window shorter than the
    document bands it again; a document as long as the sequence is plain causal (0)."""
    packed = dataclasses.replace(PLAN, packed_doc_len=512)
    assert band(_ctx(packed)) == 512 - 512 * 511 // 1024 == 257
    assert band(_ctx(packed), window=128) == 128 - 128 * 127 // 1024
    assert band(_ctx(dataclasses.replace(PLAN, packed_doc_len=4096))) == 0
    assert band(_ctx(PLAN)) == 0
    assert band(_ctx(PLAN), window=1024) == 1024 - 1024 * 1023 // 8192


def test_packing_prices_attention_over_the_documents_only() -> None:
    """The attention kernels shrink from the causal square (s / 2 keys a query) to the
    documents' band; the GEMMs and element-wise kernels do not move."""
    flat = stage0_pass(MODEL, PLAN, KM, True)
    packed = stage0_pass(MODEL, dataclasses.replace(PLAN, packed_doc_len=512), KM, True)
    full, short = (node_value(c, "layer0.attention", "flops") for c in (flat, packed))
    assert short / full == pytest.approx(257 / 2048, rel=0.01)
    for name in ("layer0.qkv", "layer0.fc1", "layer0.norm1"):
        assert node_value(flat, name) == node_value(packed, name)
    unpacked = estimate(MODEL, PLAN, "h100").iteration_time_s
    steps = [
        estimate(MODEL, dataclasses.replace(PLAN, packed_doc_len=n), "h100").iteration_time_s
        for n in (4096, 2048, 512, 128)
    ]
    assert steps[0] == unpacked and steps == sorted(steps, reverse=True)


@pytest.mark.parametrize(
    "options", [{"cp": 2, "seq": 4096}, {"flash_attention": False}, {"packed_doc_len": -1}]
)
def test_packing_is_refused_where_not_modelled(options: dict[str, object]) -> None:
    plan = dataclasses.replace(PLAN, **{"packed_doc_len": 512, **options})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="packed_doc_len"):
        plan.check(MODEL)


def test_the_cli_flag_reaches_the_plan() -> None:
    args = ["estimate", "--model", "llama3-8b", "--seq", "4096", "--packed-doc-len", "512"]
    out = CliRunner().invoke(cli, [*args, "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["result"]["plan"]["packed_doc_len"] == 512
