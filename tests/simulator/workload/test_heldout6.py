"""The sixth held-out set of published runs (scripts/data/heldout6_h100.csv,
`validate_published.py --heldout6`): MLPerf Training logs of submitters and rounds no earlier
file holds (v4.0 LoRA on seven vendors' 8 x H100 nodes, v4.1 Lambda, v4.0 Juniper on Hugging
Face + DeepSpeed ZeRO-3, v6.0 Cisco), estimated at main 549ba37 before any change to lumos'
model or costing code (docs/estimate.md, "Sixth held-out set").

- Every row parses to a plan that keeps its own stated columns, or is refused with its reason
  (the one Cisco LoRA row whose plan is not published).
- Every expressible row estimates (a positive, finite step).
- The rows take what their logs and configs state: LoRA (rank, targets, all-to-all), the
  Juniper rows' ZeRO-3, full recompute and flash-attn 2 on the `hf-eager` profile, the
  Cisco GPT-OSS row's built-in MoE shape, EP 4, expert TP 1 and DeepEP dispatcher.
- Three cheap rows are re-estimated and their error kept under a stated bound.
"""

from __future__ import annotations

import math

from lumos.simulator.workload import estimate
from tests.conftest import script_module
from tests.simulator.workload.heldout_files import parse_all, row_error, rows

EARLIER = (
    "CSV",
    "HELDOUT",
    "MOE",
    "HELDOUT2",
    "HELDOUT3",
    "TITAN",
    "HELDOUT4",
    "HELDOUT5",
    "HYBRID",
    "AUTOMODEL_LORA",
    "PARALLEL",
)
#: the one row lumos must refuse: its TP / CP are not in the record
REFUSED = "MLP60-CISCO-L2-70B-LORA-128"
JUNIPER = ("MLP40-JUNIPER-L2-70B-LORA-8", "MLP40-JUNIPER-L2-70B-LORA-32")


def test_every_heldout6_row_parses_or_says_why() -> None:
    """17 rows, no id shared with the earlier files; all parse but the refused one, each
    keeping its stated TP / PP / DP / CP / EP, batch, sequence and micro-batch, on the
    system its `hwconfig` names (else the H100's); the LoRA rows take their `lora` column."""
    parsed = parse_all("HELDOUT6", 17, EARLIER)
    assert {k for k, v in parsed.items() if isinstance(v, str)} == {REFUSED}
    for r in rows("HELDOUT6"):
        row = parsed[r["row_id"]]
        if isinstance(row, str):
            continue
        p = row.plan
        stated = (
            r["tp"],
            r["pp"],
            r["dp"],
            r["cp"],
            r["ep"],
            r["gbs_seqs"],
            r["seq_len"],
            r["mbs"],
        )
        assert tuple(str(v) for v in (p.tp, p.pp, p.dp, p.cp, p.ep, p.gbs, p.seq, p.mbs)) == stated
        assert p.world == int(r["gpus"]) and row.published_s > 0, r["row_id"]
        assert row.hw == (r["hwconfig"] or "h100"), r["row_id"]
        if r["lora"]:
            a2a = not r["row_id"].startswith("MLP40-JUNIPER")
            assert (p.lora_rank, p.lora_targets, p.lora_a2a) == (16, "qkv,proj", a2a)


def test_every_expressible_heldout6_row_estimates() -> None:
    """Each parsed row's estimate is a positive, finite step time."""
    script = script_module("validate_published")
    for r in rows("HELDOUT6"):
        row = script.parse(r)
        if isinstance(row, str):
            continue
        result = estimate(row.model, row.plan, row.hw)
        assert math.isfinite(result.iteration_time_s) and result.iteration_time_s > 0, r["row_id"]


def test_juniper_rows_run_hugging_face_on_deepspeed_zero3() -> None:
    """Juniper's run script and DeepSpeed config: ZeRO-3 (overlapped), every layer
    checkpointed, flash-attn 2, BF16, the Hugging Face model class (`hf-eager`), its
    vocabulary unpadded."""
    script = script_module("validate_published")
    table = {r["row_id"]: r for r in rows("HELDOUT6")}
    for row_id in (*JUNIPER, "MLP40-JUNIPER-L2-70B-LORA-A100-64"):
        p = script.parse(table[row_id]).plan
        assert (p.zero, p.recompute.value, p.framework, p.attention_kernel) == (
            3,
            "full",
            "hf-eager",
            "fa2",
        )
        assert p.precision.value == "bf16" and p.vocab_multiple == 1 and p.overlap_param_gather


def test_cisco_gpt_oss_row_takes_its_moe_config() -> None:
    """Cisco's v6.0 GPT-OSS 20B config: the built-in shape at 8,192 tokens, TP 2, EP 4,
    expert TP 1, DeepEP (Megatron-Core's flex dispatcher), on the RoCE system."""
    script = script_module("validate_published")
    r = next(r for r in rows("HELDOUT6") if r["row_id"] == "MLP60-CISCO-GPTOSS20B-128")
    row = script.parse(r)
    p = row.plan
    assert row.model.moe and row.model.experts == 32 and row.hw == "h100-roce"
    assert (p.tp, p.ep, p.etp, p.dispatcher, p.seq, p.dp) == (2, 4, 1, "flex", 8192, 64)


def test_three_cheap_heldout6_rows_stay_near_their_published_step() -> None:
    """NVIDIA's own 8-GPU LoRA row (3.71 s), Lambda's 32-GPU one (0.96 s) and Cisco's
    64-GPU Llama 3.1 8B row (0.351 s) within 10 % (first run: -0.3, -3.0, +3.6 %)."""
    for row_id in (
        "MLP40-NV-L2-70B-LORA-8",
        "MLP41-LAMBDA-L2-70B-LORA-32",
        "MLP60-CISCO-L31-8B-64",
    ):
        assert abs(row_error("HELDOUT6", row_id)) < 0.10, row_id
