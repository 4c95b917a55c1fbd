"""The hybrid Mamba-2 set of published runs (scripts/data/hybrid_h100.csv,
`validate_published.py --hybrid`): Nemotron-H 56B on DGX Cloud H100s, estimated first
before the SSD kernels' bandwidth was sourced (docs/estimate.md, "Hybrid Mamba-2 models").

- Every row parses to the built-in its `model_spec` names, with its own stated columns.
- The recipe's software: TP-comm overlap, the distributed optimizer, no parameter-gather
  overlap, FP8 (with FP8 parameters where NeMo's performance script sets them), sequence
  parallelism.
- Two rows are re-estimated and their error kept under a stated bound.
"""

from __future__ import annotations

import pytest

from tests.simulator.workload.heldout_files import (
    check_launch_columns,
    parse_all,
    row_error,
    rows,
)

EARLIER = ("HELDOUT", "MOE", "HELDOUT2", "HELDOUT3", "TITAN", "HELDOUT4", "HELDOUT5")


def test_every_hybrid_row_parses_to_the_built_in() -> None:
    """8 rows, none skipped, each the 56B built-in (118 layers, 54 Mamba-2) on TP 8, MBS 1,
    GBS 3 x GPUs, with the NeMo recipe's software."""
    parsed = parse_all("HYBRID", 8, EARLIER)
    assert not [k for k, v in parsed.items() if isinstance(v, str)]
    check_launch_columns("HYBRID", parsed)
    for r in rows("HYBRID"):
        row = parsed[r["row_id"]]
        p, m = row.plan, row.model
        assert (m.name, m.layers, m.pattern.count("M"), m.seq) == ("nemotron-h-56b", 118, 54, 8192)
        assert (p.tp, p.gbs, p.precision.value, p.zero) == (8, 3 * p.world, "fp8", 1)
        assert (p.tp_comm_overlap, p.sequence_parallel, p.overlap_param_gather) == (
            True,
            True,
            False,
        )
        # NeMo 25.04's performance script: delayed scaling with FP8 parameters (Y1); the
        # later Megatron-Bridge row (Y2) is not known to set them
        assert p.fp8_param_gather == (not r["row_id"].endswith("-MB")), r["row_id"]


#: first run -20.3 %, -23.2 %; with the SSD bandwidth fraction and the recipe's FP8
#: parameters -13.9 %, -17.4 %; the bound leaves room for accuracy work, not for a
#: regression past it
BOUND = {"DGXC-NH56B-32": 0.20, "DGXC-NH56B-256": 0.20}


@pytest.mark.parametrize("row_id", sorted(BOUND))
def test_hybrid_rows_stay_within_their_bound(row_id: str) -> None:
    """Nemotron-H 56B FP8 on 32 and 256 H100s: |estimate / published - 1| within bound."""
    err = row_error("HYBRID", row_id)
    assert abs(err) <= BOUND[row_id], f"{row_id}: {100 * err:+.1f} %"
