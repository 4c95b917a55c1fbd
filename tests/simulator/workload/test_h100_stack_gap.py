"""Why llm-foundry runs slower on H100 than lumos estimates (scripts/sweep_decompose.py;
docs/estimate.md, "Why non-NVIDIA stacks run slower on H100").

The published MPT sequence sweeps split each step into a per-token cost `c` and a per-key
(attention) cost `k`; the same split of lumos' estimates says which part is priced off on
which GPU. The checks on the published rows hold the evidence of the open gap: a change
that closes it moves them, and then the doc's table and these bounds are updated with it.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from lumos.simulator.workload import ParallelPlan, Recompute
from tests.conftest import script_module
from tests.simulator.workload.heldout_files import rows


def test_fit_line_recovers_per_token_and_per_key_cost() -> None:
    """µs a token on an exact line c + k·s comes back as (c, k in ns); one length is refused."""
    sd = script_module("sweep_decompose")
    seqs = [512, 2048, 8192, 32768]
    line = sd.fit_line(seqs, [90.0 + 6.4e-3 * s for s in seqs])
    assert line.c_us == pytest.approx(90.0) and line.k_ns == pytest.approx(6.4)
    with pytest.raises(ValueError):
        sd.fit_line([2048, 2048], [1.0, 1.1])


def test_attention_passes_count_what_recompute_reruns() -> None:
    """Flash attention runs 1 forward + 2.5 (backward) causal passes, one more when full
    recompute or selective `core_attn` re-runs it; selective `mlp` alone does not."""
    sd = script_module("sweep_decompose")
    plan = ParallelPlan(dp=8, mbs=1, gbs=8, seq=2048)
    assert sd.attention_passes(plan) == 3.5
    assert sd.attention_passes(replace(plan, recompute=Recompute.FULL)) == 4.5
    assert sd.attention_passes(replace(plan, recompute=Recompute.SELECTIVE)) == 4.5
    mlp = replace(plan, recompute=Recompute.SELECTIVE, recompute_modules="mlp")
    assert sd.attention_passes(mlp) == 3.5


def test_llm_foundry_7b_sweep_attention_gap_is_h100_only() -> None:
    """MPT-7B with activation checkpointing, 8 GPUs, 1K … 64K tokens, the same sweep and
    image on both GPUs (G4 H100, G9 A100 control). Published: attention ~184 TFLOP/s on the
    H100 and ~101 on the A100 (1.8x); lumos prices ~212 and ~96 (2.2x). So the per-key cost
    is within 10 % on the A100 and over 10 % too fast on the H100, and the per-token part
    is ~10 % more off on the H100 than on the A100 (open: no sourced mechanism prices it)."""
    sd = script_module("sweep_decompose")
    picked = [
        r
        for r in rows("HELDOUT2")
        if r["row_id"].startswith(("LF-MPT-7B-BF16", "LFA-MPT-7B-BF16"))
        and "full" in r["recompute"]
    ]
    sweeps = {s.hw: s for s in sd.decompose(picked)}
    h100, a100 = sweeps["h100"], sweeps["a100"]
    assert len(h100.seqs) == 5 and len(a100.seqs) == 6
    assert 0.9 < a100.k_ratio < 1.1 and h100.k_ratio > 1.10
    assert 170 < h100.published_attention_tflops < 200
    assert 90 < a100.published_attention_tflops < 115
    published = h100.published_attention_tflops / a100.published_attention_tflops
    lumos = h100.lumos_attention_tflops / a100.lumos_attention_tflops
    assert 1.6 < published < 2.0 < lumos
    assert h100.c_ratio / a100.c_ratio > 1.05
