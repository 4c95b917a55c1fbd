"""Where a hybrid step's priced compute goes (scripts/op_breakdown.py) and the evidence of
the open Nemotron-H gap (docs/estimate.md, "Hybrid Mamba-2 / Transformer models", "Where
the time goes, and what was checked").

The checks on the published rows hold the diagnosis: lumos prices DGX Cloud's Nemotron-H
56B 10-20 % too fast, the SSD scan is 20 % of the priced compute, its forward's rate is
measured on the Triton kernels (vLLM #27299) and its backward's is not; the backward
kernels at half the forward's rate would close both that gap and the Nemotron 3 Nano
row's. A change that closes the gap moves these, and then the doc and the bounds move too.
"""

from __future__ import annotations

from typing import Any

import pytest

from lumos.simulator.workload import ParallelPlan, load_model
from lumos.simulator.workload import mamba as mamba_module
from tests.conftest import script_module
from tests.simulator.workload.heldout_files import row_error, rows


def test_ops_add_up_to_the_busy_stream_and_key_every_layer_by_kind() -> None:
    """Nemotron-H 8B, 2 micro-batches: the ops sum to the stream's busy time and to the
    kinds' sums; one SSD backward a Mamba layer a micro-batch; a plain decoder's layers
    are one kind."""
    ob = script_module("op_breakdown")
    model = load_model("nemotron-h-8b")
    b = ob.breakdown(model, ParallelPlan(tp=2, mbs=1, gbs=2, seq=2048), "h100")
    assert sum(t.seconds for t in b.ops) == pytest.approx(b.busy_s)
    assert sum(b.by_kind.values()) == pytest.approx(b.busy_s)
    assert set(b.by_kind) == {"M", "-", "*", "other"}
    (scan,) = [t for t in b.ops if t.op == "ssd_scan_bwd"]
    assert (scan.kind, scan.kernels) == ("M", 2 * model.pattern.count("M"))
    assert b.seconds("ssd_scan_bwd") == b.seconds("ssd_scan_bwd", "M") > 0
    dense = ob.breakdown(load_model("llama3-8b"), ParallelPlan(mbs=1, gbs=1, seq=2048), "h100")
    assert set(dense.by_kind) == {"layer", "other"}


def _row(row_id: str, file: str = "HYBRID") -> Any:
    script = script_module("validate_published")
    return script.parse(next(r for r in rows(file) if r["row_id"] == row_id))


def test_nemotron_h_56b_compute_splits_as_the_doc_says() -> None:
    """DGXC-NH56B-256 (TP 8, 24 micro-batches): 12.78 s of priced compute, the Mamba layers
    54 % of it, their SSD scan 0.61 s forward + 1.95 s backward (20 %), in_proj and
    out_proj 3.81 s (30 %); the MLP layers' FC1 / FC2 4.31 s."""
    ob = script_module("op_breakdown")
    row = _row("DGXC-NH56B-256")
    b = ob.breakdown(row.model, row.plan, row.hw)
    assert b.busy_s == pytest.approx(12.78, rel=0.01)
    assert b.by_kind["M"] / b.busy_s == pytest.approx(0.544, abs=0.01)
    assert b.seconds("ssd_scan") == pytest.approx(0.609, rel=0.02)
    assert b.seconds("ssd_scan_bwd") == pytest.approx(1.946, rel=0.02)
    proj = ("in_proj", "in_proj.dgrad", "in_proj.wgrad", "out_proj", "out_proj.dgrad")
    assert sum(b.seconds(op) for op in (*proj, "out_proj.wgrad")) == pytest.approx(3.81, rel=0.02)
    fc = sum(b.seconds(op, "-") for op in ("fc#", "fc#.dgrad", "fc#.wgrad"))
    assert fc == pytest.approx(4.31, rel=0.02)


@pytest.mark.parametrize(
    ("file", "row_id"),
    [
        ("HYBRID", "DGXC-NH56B-256"),
        ("HYBRID", "DGXC-NH56B-32"),
        ("MOE", "AM2602-Nemotron-V3-Nano-30B"),
    ],
)
def test_the_ssd_backward_at_half_the_forward_rate_would_close_the_hybrid_gap(
    file: str, row_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The open gap: 10-20 % too fast now; with the SSD backward's kernels moving twice
    their bytes (half the forward's measured rate, 0.196 of peak HBM: not a sourced
    number, so not priced) within 5 %."""
    assert -0.20 < row_error(file, row_id) < -0.10
    kernels = mamba_module.backward_kernels

    def doubled(z: Any) -> list[tuple[float, float]]:
        return [(f, 2 * b) for f, b in kernels(z)]

    monkeypatch.setattr(mamba_module, "backward_kernels", doubled)
    assert abs(row_error(file, row_id)) < 0.05
