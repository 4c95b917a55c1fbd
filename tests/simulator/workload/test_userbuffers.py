"""Transformer Engine userbuffers configs of the TP-comm overlap, as NeMo's recipes ship them
(`simulator/workload/userbuffers.py`), each on a hand-made plan, named after the mechanism:

- the ring-exchange `aggregate` of the Llama 3.1 405B config (TP 8): TP / 2 GEMMs on two
  shards each instead of TP GEMMs on one;
- `fp8_buf`: under FP8 the pipelined reduce-scatter moves the GEMM's FP8 output;
- a config the recipe states itself (plan `ub_config`, the DGX Cloud GPT-3 175B recipe);
- Transformer Engine's defaults where NeMo ships no config for the shape (Nemotron-4 340B);
- FP8 all-gather buffers under FP8 training (every config).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload import ParallelPlan, Precision
from lumos.simulator.workload.block import Block
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.spec import load_model
from lumos.simulator.workload.userbuffers import RECIPES, TE_DEFAULT, gemm_key, ub_config

KM = KernelModel.for_gpu(load_system("h100").gpu)
SM = KM.physics.sm_count


def _block(model: str, plan: ParallelPlan, forward: bool) -> tuple[Block, np.ndarray, Generator]:
    gen = Generator(load_model(model), plan, KM)
    blk = gen.block(0, 0, forward)
    return blk, np.asarray(gen.names.as_list())[blk.name], gen


def _plan(tp: int, seq: int, fp8: bool = False, **kw: object) -> ParallelPlan:
    precision = Precision.FP8 if fp8 else Precision.BF16
    return ParallelPlan(
        tp=tp, mbs=1, gbs=1, seq=seq, zero=0, tp_comm_overlap=True, precision=precision, **kw
    )


@pytest.mark.parametrize("fp8", [False, True])
def test_ring_exchange_aggregate_runs_tp_over_two_gemms(fp8: bool) -> None:
    """Llama 3.1 405B at TP 8 (NeMo's ub_cfg_h100_*_h16384_tp8_cp2: `aggregate: 1`): the QKV
    and FC1 forward GEMMs and the proj dgrad run in 4 steps of two shards; FC2's dgrad is
    aggregated under BF16 only. Llama 3 70B at TP 4 (no `aggregate`) keeps TP steps."""
    plan = _plan(8, 8192, fp8)
    fwd, names, gen = _block("llama3.1-405b", plan, True)
    T = gen.ctx.T
    for gemm in ("qkv", "fc1"):
        mask = names == f"layer0.{gemm}"
        assert mask.sum() == 4
        n = gen.ctx.qkv_width if gemm == "qkv" else gen.ctx.up_width
        want = KM.gemm_ns(T // 4, n, gen.ctx.h, "fp8" if fp8 else "bf16")
        assert fwd.cols["dur"][int(np.flatnonzero(mask)[0])] == pytest.approx(want, abs=1)
    _, bwd_names, _ = _block("llama3.1-405b", plan, False)
    assert (bwd_names == "layer0.proj.dgrad").sum() == 4
    assert (bwd_names == "layer0.fc2.dgrad").sum() == (8 if fp8 else 4)
    _, names70, _ = _block("llama3-70b", _plan(4, 8192, fp8), True)
    assert (names70 == "layer0.qkv").sum() == 4  # TP 4, one shard a step


def test_fp8_buf_reduce_scatters_fp8_bytes() -> None:
    """Llama 3 70B, TP 4 (ub_cfg_h100_fp8_h8192_tp4: `fp8_buf: 1` on proj and FC2): each
    pipelined reduce-scatter chunk moves 1 byte an element under FP8, 2 under BF16."""
    sizes = {}
    for fp8 in (False, True):
        blk, names, gen = _block("llama3-70b", _plan(4, 8192, fp8), True)
        mask = names == "layer0.proj.reduce_scatter"
        assert mask.sum() == 4
        sizes[fp8] = set(np.asarray(blk.cols["csize"])[mask])
        assert sizes[fp8] == {gen.ctx.T * gen.ctx.h * (1 if fp8 else 2) // 4}
    assert 2 * min(sizes[True]) == min(sizes[False])


def test_recipe_ub_config_named_by_the_plan() -> None:
    """GPT-3 175B, TP 4, with the DGX Cloud recipe's own config (plan `ub_config`): FC2's
    reduce-scatter holds 20 SMs in 4 splits, QKV's wgrad shares its GEMM with 8; without it,
    NeMo's h12288 / TP 4 config: FC2 a ring exchange on 1 SM (TP chunks), QKV wgrad 4."""
    plan = _plan(4, 2048, ub_config="dgxc-gpt3-175b")
    fwd, names, gen = _block("gpt3-175b", plan, True)
    T, h, ffn = gen.ctx.T, gen.ctx.h, gen.ctx.ffn
    mask = names == "layer0.fc2"
    assert mask.sum() == 4
    want = KM.gemm_ns(T // 4, h, ffn, sms=SM - 20)
    assert fwd.cols["dur"][int(np.flatnonzero(mask)[0])] == pytest.approx(want, abs=1)
    bwd, bnames, _ = _block("gpt3-175b", plan, False)
    wgrad = KM.gemm_ns(gen.ctx.qkv_width, h, T, out_bytes=8, sms=SM - 8)
    assert bwd.cols["dur"][bnames == "layer0.qkv.wgrad"] == pytest.approx(round(wgrad), abs=1)
    fwd2, names2, _ = _block("gpt3-175b", dataclasses.replace(plan, ub_config=""), True)
    mask2 = names2 == "layer0.fc2"
    assert mask2.sum() == 4  # TP 4 ring-exchange chunks
    want2 = KM.gemm_ns(T // 4, h, ffn, sms=SM - 1)
    assert fwd2.cols["dur"][int(np.flatnonzero(mask2)[0])] == pytest.approx(want2, abs=1)
    with pytest.raises(ConfigError, match="ub_config"):
        _plan(4, 2048, ub_config="no-such-recipe").check(load_model("gpt3-175b"))


def test_te_default_ub_config_without_a_shipped_one() -> None:
    """Nemotron-4 340B, TP 8 (the recipe enables the overlap and names no config): Transformer
    Engine's defaults, 16 SMs for every bulk and pipeline overlap."""
    assert ub_config(18432, 8, True) is TE_DEFAULT
    plan = _plan(8, 4096)
    bwd, names, gen = _block("nemotron4-340b", plan, False)
    T, h = gen.ctx.T, gen.ctx.h
    dgrad = KM.gemm_ns(T, h, gen.ctx.up_width, sms=SM - 16)
    assert bwd.cols["dur"][names == "layer0.fc1.dgrad"] == pytest.approx(round(dgrad), abs=1)


def test_gemm_keys_and_recipes() -> None:
    assert gemm_key("layer3.qkv") == "qkv.fprop"
    assert gemm_key("layer3.recompute.fc1") == "fc1.fprop"
    assert gemm_key("layer3.proj.dgrad") == "proj.dgrad"
    assert "dgxc-gpt3-175b" in RECIPES


def test_fp8_all_gathers_move_fp8_bytes() -> None:
    """Llama 3 70B, TP 4: under FP8 Transformer Engine makes every userbuffers all-gather
    buffer FP8 (`initialize_ub`: `fp8_buf = name in layers_all_gather_overlap or ...`), so
    the QKV forward ring exchange and the backward's bulk input re-gather move half the
    bytes they move under BF16."""
    moved = {}
    for fp8 in (False, True):
        fwd, names, _ = _block("llama3-70b", _plan(4, 8192, fp8), True)
        bwd, bnames, _ = _block("llama3-70b", _plan(4, 8192, fp8), False)
        csize, bsize = np.asarray(fwd.cols["csize"]), np.asarray(bwd.cols["csize"])
        moved[fp8] = (
            int(csize[names == "layer0.qkv.all_gather"].sum()),
            int(bsize[bnames == "layer0.qkv.input_all_gather"].sum()),
        )
    assert moved[False][0] > 0 and moved[False][1] > 0
    assert moved[True] == (moved[False][0] // 2, moved[False][1] // 2)
