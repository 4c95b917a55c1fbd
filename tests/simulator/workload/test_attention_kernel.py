"""A recipe that turns Transformer Engine's cuDNN fused attention off (`NVTE_FUSED_ATTN=0`)
runs flash-attn 2 (plan `attention_kernel="fa2"`), priced at `framework.ATTENTION["fa2"]` of
the hardware file's fused-attention rate; everything else in the layer is unchanged."""

from __future__ import annotations

import pytest

from lumos.errors import ConfigError
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload import ParallelPlan
from lumos.simulator.workload.framework import ATTENTION
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.spec import model_from_dict
from tests.conftest import script_module

SMALL = {"layers": 2, "hidden": 256, "heads": 4, "kv_heads": 2, "ffn": 512, "vocab": 512}


def _durations(plan: ParallelPlan, forward: bool) -> dict[str, int]:
    model = model_from_dict(dict(SMALL), "small")
    gen = Generator(model, plan, KernelModel.for_gpu(load_system("h100").gpu))
    blk, names = gen.block(0, 0, forward), gen.names.as_list()
    return {names[n]: int(blk.cols["dur"][i]) for i, n in enumerate(blk.name)}


def test_nvte_fused_attn_0_runs_flash_attn_2() -> None:
    model = model_from_dict(dict(SMALL), "small")
    base = ParallelPlan.build(model, dp=1, gbs=1, seq=4096)
    fa2 = ParallelPlan.build(model, dp=1, gbs=1, seq=4096, attention_kernel="fa2")
    km = KernelModel.for_gpu(load_system("h100").gpu)
    for forward, name in ((True, "layer0.attention"), (False, "layer0.attention_bwd")):
        a, b = _durations(base, forward), _durations(fa2, forward)
        for plan_ns, kernel in ((a[name], "cudnn"), (b[name], "fa2")):
            scale = ATTENTION[kernel][0 if forward else 1]
            ns = km.attention_ns(4, 4096, 4096, 64, True, not forward, scale)
            assert plan_ns == pytest.approx(ns, abs=1)
        assert b[name] > 1.5 * a[name]
        assert {k: v for k, v in a.items() if "attention" not in k} == {
            k: v for k, v in b.items() if "attention" not in k
        }
    with pytest.raises(ConfigError, match="attention_kernel"):
        ParallelPlan.build(model, dp=1, gbs=1, seq=4096, attention_kernel="fa3")
    settings = script_module("recipe_settings").recipe_settings
    row = {"locator": "x", "framework": "NeMo", "notes": "NVTE_FUSED_ATTN=0; ub on", "pp": "1"}
    assert settings(row)["attention_kernel"] == "fa2"
    assert settings({**row, "notes": "NVTE_FUSED_ATTN=1"})["attention_kernel"] == ""
