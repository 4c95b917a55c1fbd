"""The seventh held-out set of published runs (scripts/data/heldout7_h100.csv,
`validate_published.py --heldout7`): DGX Cloud's NeMo 24.12 Llama 3 8B / 70B fine-tuning
recipe (SFT and LoRA, BF16 and FP8, 8 ... 32 H100) and ASUSTeK's MLPerf v5.0 Llama 2 70B LoRA
on 16 H200 as a control, estimated at main 659d94c before any change to lumos' model or
costing code (docs/estimate.md, "Seventh held-out set").

- Every row parses to a plan that keeps its stated columns (TP / PP / DP / CP, virtual
  stages, batch, sequence, micro-batch, GPUs, system).
- The rows take what the launcher and the NeMo recipe state: the 70B SFT rows' TP-comm
  overlap and deferred embedding wgrad, the LoRA rows' rank, targets and no distributed
  optimizer, every DGX Cloud row's packed SQuAD sequences.
- Every row estimates; two cheap rows stay within a stated bound of their published step.
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
    "HELDOUT6",
)


def test_every_heldout7_row_parses_to_its_stated_plan() -> None:
    """21 rows, no id shared with the earlier files, none refused; each keeps its stated
    degrees, virtual stages (NA: 1), batch, sequence and micro-batch, fills its GPUs and runs
    on the system its `hwconfig` names (else the H100)."""
    parsed = parse_all("HELDOUT7", 21, EARLIER)
    assert not [k for k, v in parsed.items() if isinstance(v, str)]
    for r in rows("HELDOUT7"):
        p = parsed[r["row_id"]].plan
        vp = r["vp"] if r["vp"].isdigit() else "1"
        stated = (r["tp"], r["pp"], r["dp"], r["cp"], vp, r["gbs_seqs"], r["seq_len"], r["mbs"])
        assert tuple(str(v) for v in (p.tp, p.pp, p.dp, p.cp, p.vp, p.gbs, p.seq, p.mbs)) == stated
        assert p.world == int(r["gpus"]) and parsed[r["row_id"]].published_s > 0, r["row_id"]
        assert parsed[r["row_id"]].hw == (r["hwconfig"] or "h100"), r["row_id"]


def test_dgx_cloud_rows_take_the_recipe_settings() -> None:
    """NeMo 24.12's llama3_{8b,70b}.py finetune recipes (performance mode) and the DGX Cloud
    launcher: LoRA rank 8 (8B) / 16 (70B) on qkv without the distributed optimizer or loss
    fusion; 70B SFT with TP-comm overlap and the embedding wgrad deferred 22 micro-batches;
    sequence parallelism where TP > 1; SQuAD packed (documents of 200 tokens assumed)."""
    parsed = parse_all("HELDOUT7", 21, EARLIER)
    for r in rows("HELDOUT7"):
        if not r["row_id"].startswith("DGXC-"):
            continue
        p = parsed[r["row_id"]].plan
        lora = "-LORA-" in r["row_id"]
        big = "-70B-" in r["row_id"]
        assert p.packed_doc_len == 200 and p.sequence_parallel == (p.tp > 1), r["row_id"]
        assert p.precision.value == ("fp8" if "-FP8-" in r["row_id"] else "bf16")
        if lora:
            assert (p.lora_rank, p.lora_targets, p.zero) == (16 if big else 8, "qkv", 0)
            assert not p.loss_fusion and not p.tp_comm_overlap
        else:
            assert p.zero == 1 and p.lora_rank == 0 and p.overlap_grad_reduce
            assert p.tp_comm_overlap == big and p.defer_embedding_wgrad == (22 if big else 0)


def test_h200_control_row_runs_on_the_h200() -> None:
    """ASUSTeK's v5.0 LoRA log and config: GBS 8 on 16 H200, TP 2, FP8, TP-comm overlap,
    LoRA rank 16 on qkv and the output projection; 8 / 4.5790 samples/s = 1.7471 s."""
    script = script_module("validate_published")
    r = next(r for r in rows("HELDOUT7") if r["row_id"] == "MLP50-ASUS-L2-70B-LORA-H200-16")
    row = script.parse(r)
    p = row.plan
    assert row.hw == "h200" and abs(row.published_s - 1.7471) < 1e-4
    assert (p.tp, p.dp, p.gbs, p.seq, p.lora_rank, p.lora_targets) == (
        2,
        8,
        8,
        8192,
        16,
        "qkv,proj",
    )
    assert p.tp_comm_overlap and p.precision.value == "fp8"


def test_every_heldout7_row_estimates() -> None:
    """Each row's estimate is a positive, finite step time."""
    script = script_module("validate_published")
    for r in rows("HELDOUT7"):
        row = script.parse(r)
        result = estimate(row.model, row.plan, row.hw)
        assert math.isfinite(result.iteration_time_s) and result.iteration_time_s > 0, r["row_id"]


def test_two_cheap_heldout7_rows_stay_near_their_published_step() -> None:
    """The 8-GPU Llama 3 8B SFT BF16 row (1.32 s) and LoRA FP8 row (0.68 s) within 6 %
    (first run: +1.7, -1.8 %)."""
    for row_id in ("DGXC-FT-L3-8B-SFT-BF16-8", "DGXC-FT-L3-8B-LORA-FP8-8"):
        assert abs(row_error("HELDOUT7", row_id)) < 0.06, row_id
