"""Why llm-foundry runs slower on H100 than lumos estimates (scripts/sweep_decompose.py;
docs/estimate.md, "Why non-NVIDIA stacks run slower on H100" and "H100-specific causes
checked again": FlashAttention-2's published Hopper rate, Juniper's 8- against 32-GPU rows,
Paxml's scale).

The published MPT sequence sweeps split each step into a per-token cost `c` and a per-key
(attention) cost `k`; the same split of lumos' estimates says which part is priced off on
which GPU. The checks on the published rows hold the evidence of the open gap: a change
that closes it moves them, and then the doc's table and these bounds are updated with it.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload import ParallelPlan, Recompute
from lumos.simulator.workload.framework import ATTENTION
from tests.conftest import script_module
from tests.simulator.workload.heldout_files import row_error, rows


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


#: FlashAttention-2 on one H100, BF16, causal, head dim 128, 2 x 8,192 tokens, 16 heads
#: (Dao-AILab/flash-attention PR #1791, `hopper/benchmark_attn.py` on `main`): TFLOP/s
FA2_H100_BENCH = {"fwd": 284.1, "bwd": 287.1}


def test_fa2_on_h100_is_priced_at_its_published_kernel_rate_at_the_sustained_clock() -> None:
    """lumos' `fa2` attention on the H100 (the file's fused-attention efficiency x the `fa2`
    ratio, at `sustained_clock_fraction` 0.80) is the published FA2 benchmark forward at that
    clock and 0.71 of its backward: no faster than the kernel was measured, so the in-situ
    slowness of the llm-foundry sweeps (~175-184 TFLOP/s fwd+bwd against the benchmark's
    ~286) is not FA2's kernel rate on Hopper (docs/estimate.md, "H100-specific causes checked
    again")."""
    km = KernelModel.for_gpu(load_system("h100").gpu)
    fwd_ratio, bwd_ratio = ATTENTION["fa2"]
    shape = (2 * 16, 8192, 8192, 128)
    rates = {}
    for name, backward, ratio in (("fwd", False, fwd_ratio), ("bwd", True, bwd_ratio)):
        ns = km.attention_ns(*shape, causal=True, backward=backward, relative_efficiency=ratio)
        rates[name] = km.attention_flops(*shape, causal=True, backward=backward) / ns / 1e3
    clock = km.physics.sustained_clock_fraction
    assert clock == pytest.approx(0.80)
    assert rates["fwd"] / FA2_H100_BENCH["fwd"] == pytest.approx(clock, abs=0.03)
    assert 0.65 < rates["bwd"] / FA2_H100_BENCH["bwd"] < clock


def test_juniper_8_gpu_row_is_slower_than_its_32_gpu_row_at_equal_work_a_gpu() -> None:
    """Juniper's Hugging Face + DeepSpeed ZeRO-3 LoRA runs do one 8,192-token sequence a GPU
    a step on 8 and on 32 H100s; the single node is 1.28x slower (12.68 vs 9.91 s) although
    its ZeRO-3 gathers stay inside NVLink. lumos prices the two within 2 % of each other, so
    no kernel rate (the same on both) can bring both rows within 12 %: at least ~25 points
    of the 8-GPU row are not in the kernels."""
    ids = ("MLP40-JUNIPER-L2-70B-LORA-8", "MLP40-JUNIPER-L2-70B-LORA-32")
    published = {
        r["row_id"]: float(r["iter_time_s"]) for r in rows("HELDOUT6") if r["row_id"] in ids
    }
    lumos = {i: (1 + row_error("HELDOUT6", i)) * published[i] for i in ids}
    assert published[ids[0]] / published[ids[1]] > 1.25
    assert lumos[ids[0]] / lumos[ids[1]] == pytest.approx(1.0, abs=0.02)


def test_paxml_gap_is_flat_from_16_to_128_gpus() -> None:
    """Paxml GPT-5B BF16 on 16 ... 128 H100 (FSDP inside each node, replicas across nodes):
    the published step and lumos' both stay flat with scale, so their ratio does too (within
    2 points): the H100 gap of this JAX stack is not in the network or its collectives."""
    ids = [f"DGXC-Paxml-GPT5B-BF16-{n}" for n in (16, 32, 64, 128)]
    errors = [row_error("HELDOUT2", i) for i in ids]
    assert max(errors) - min(errors) < 0.02
    assert all(-0.30 < e < -0.20 for e in errors)
