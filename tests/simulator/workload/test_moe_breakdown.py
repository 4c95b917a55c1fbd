"""The per-op-class breakdown of a mixture-of-experts row's layer pass
(`scripts/moe_breakdown.py`), on the Megatron-Bridge 25.11 Qwen3-30B-A3B row (TP1 PP2 x
VP24 DP8 EP8, mbs 2, FP8, dropless: one layer a chunk, 16 local experts of 4,096 rows)."""

from __future__ import annotations

import pytest

from tests.conftest import script_module

ROW = "MB2511-Qwen3-30B-A3B"


def test_every_moe_op_of_a_layer_pass_has_a_class_and_the_classes_add_up() -> None:
    """Each compute node of the chunk lands in one class, so the classes add up to the
    chunk's compute-stream time; no MoE op falls into `other` (a new MoE op must be
    classed before the breakdown is trusted)."""
    mb = script_module("moe_breakdown")
    gen = mb.generator(mb.find_row(ROW))
    classes, layers = mb.layer_pass_ns(gen)
    assert layers == 1
    names = gen.names.as_list()
    total, moe_other = 0, []
    for forward in (True, False):
        blk = gen.block(0, 1, forward)
        for i in range(len(blk)):
            if int(blk.cols["stream"][i]) != mb.COMPUTE:
                continue
            total += int(blk.cols["dur"][i])
            name = names[blk.name[i]]
            if ".moe." in name and mb.op_class(name) == "other":
                moe_other.append(name)
    assert moe_other == []
    assert sum(classes.values()) == pytest.approx(total)


def test_small_expert_gemms_are_priced_at_the_per_expert_host_floor() -> None:
    """The six grouped GEMMs of a layer pass (FC1, FC2, their data and weight gradients)
    each at 16 local experts x `grouped_gemm_expert_ns` (33 us): 3.168 ms, above their
    tile-and-wave GPU time (0.21-0.49 ms each at FP8); core attention and the memory
    passes as the breakdown in docs/estimate.md ("Many small experts")."""
    mb = script_module("moe_breakdown")
    gen = mb.generator(mb.find_row(ROW))
    classes, _ = mb.layer_pass_ns(gen)
    floor = 6 * 16 * gen.ctx.km.physics.grouped_gemm_expert_ns
    assert classes["expert GEMMs"] == pytest.approx(floor)
    assert classes["expert GEMMs"] / 1e6 == pytest.approx(3.168, abs=1e-3)
    assert classes["core attention"] / 1e6 == pytest.approx(2.798, rel=0.01)
    assert classes["sort / pad passes"] / 1e6 == pytest.approx(1.604, rel=0.01)
    assert mb.op_class("l3.moe.fc2.wgrad") == "expert GEMMs"
    assert mb.op_class("l3.moe.fc1.cast_fp8") == "expert FP8 casts"
    assert mb.op_class("l3.moe.fp8_unpad_bwd") == "sort / pad passes"


@pytest.mark.parametrize("row_id", [ROW, "MB2602-Qwen3-30B-A3B"])
def test_rows_noted_as_a_release_regression_still_run_their_dropless_plan(row_id: str) -> None:
    """The two Qwen3-30B rows' notes cite Megatron-Bridge issue #1998 (a 2x release
    regression) without words the row parser reads as settings: they stay dropless on the
    all-to-all dispatcher (no `token-drop`, DeepEP or overlap wording picked up)."""
    mb = script_module("moe_breakdown")
    plan = mb.find_row(row_id).plan
    assert not plan.moe_token_drop
    assert plan.dispatcher == "alltoall"
    assert not plan.a2a_overlap
    notes = next(
        r["notes"] for r in mb.csv.DictReader(mb.vp.HELDOUT.open()) if r["row_id"] == row_id
    )
    assert "issue #1998" in notes
