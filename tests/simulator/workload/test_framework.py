"""Framework kernel profiles (`--framework`) and the torchtitan H100 (`--hw h100-96gb-500w`),
each mechanism on a small plan, named after what it changes in the generated kernels."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.errors import ConfigError
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload import ParallelPlan, Precision, Recompute, estimate
from lumos.simulator.workload.block import COMPUTE, DP_STREAM
from lumos.simulator.workload.framework import ATTENTION, EAGER, PROFILES
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.memory import layer_activation_bytes
from lumos.simulator.workload.spec import ModelSpec
from tests.simulator.workload.passes import node_value, stage0_pass
from tests.simulator.workload.tiny_models import tiny_llama

KM = KernelModel.for_gpu(load_system("h100").gpu)
TINY = tiny_llama(4096)


def _pass(plan: ParallelPlan, forward: bool, model: ModelSpec = TINY) -> dict[str, np.ndarray]:
    """One chunk pass of stage 0: node names and columns."""
    return stage0_pass(model, plan, KM, forward)


_node = node_value


def test_megatron_is_the_default_and_kept_in_the_plan_json() -> None:
    plan = ParallelPlan(mbs=1, gbs=1, seq=4096, zero=0)
    assert plan.framework == "megatron"
    assert plan.to_dict()["framework"] == "megatron"
    with pytest.raises(ConfigError, match="framework must be one of megatron"):
        ParallelPlan.build(TINY, framework="jax")


def test_eager_rmsnorm_rope_swiglu_move_the_op_chains_bytes() -> None:
    """torchtitan's eager Llama: RMSNorm 36 B a element forward (x.float, pow, mean,
    mul, type_as, mul) against 4 fused; RoPE 20 against 4; SwiGLU 10 against 6 a FFN
    element; backward 84 / 20 / 18."""
    base = ParallelPlan(mbs=1, gbs=1, seq=4096, zero=0)
    fused = _pass(base, True)
    eager = _pass(dataclasses.replace(base, framework="torchtitan"), True)
    T, h = 4096, 1024
    assert _node(fused, "layer0.norm1", "nbytes") == 4 * T * h
    assert _node(eager, "layer0.norm1", "nbytes") == EAGER["rmsnorm"][0].bytes_per_element * T * h
    assert _node(eager, "layer0.rope", "nbytes") == 20 * T * (8 + 2) * 128
    assert _node(eager, "layer0.activation", "nbytes") == 10 * T * 3584
    bwd = _pass(dataclasses.replace(base, framework="torchtitan"), False)
    assert _node(bwd, "layer0.norm1_bwd", "nbytes") == 84 * T * h
    # one node per chain, priced with one kernel overhead per op
    chain = EAGER["rmsnorm"][0]
    want = KM.memory_ns(36 * T * h, overhead=False) + chain.kernels * KM.physics.kernel_overhead_ns
    assert _node(eager, "layer0.norm1") == pytest.approx(want, abs=1)
    # torch.compile fuses them back (Inductor): the fused byte counts
    compiled = _pass(dataclasses.replace(base, framework="torchtitan-compile"), True)
    assert _node(compiled, "layer0.norm1", "nbytes") == 4 * T * h


def test_gqa_repeat_kv_copies_only_in_torchtitan() -> None:
    base = ParallelPlan(mbs=1, gbs=1, seq=4096, zero=0)
    assert "layer0.repeat_kv" not in set(_pass(base, True)["name"])
    titan = _pass(dataclasses.replace(base, framework="torchtitan-compile"), True)
    assert _node(titan, "layer0.repeat_kv", "nbytes") == 2 * 4096 * 128 * (8 + 2) * 2


def test_sdpa_flash_attention_2_is_slower_than_cudnn() -> None:
    """PyTorch SDPA's H100 backend in torchtitan's nightly is FlashAttention-2: forward at
    329.5/631.3 and backward at 318/518 of the fused-attention efficiency."""
    base = ParallelPlan(mbs=1, gbs=1, seq=4096, zero=0)
    fa3, fa2 = _pass(base, True), _pass(dataclasses.replace(base, framework="torchtitan"), True)
    over = KM.physics.kernel_overhead_ns
    ratio = (_node(fa2, "layer0.attention") - over) / (_node(fa3, "layer0.attention") - over)
    assert ratio == pytest.approx(1 / ATTENTION["fa2"][0], rel=1e-3)


def test_fsdp2_copies_out_on_the_compute_stream_and_reduces_in_fp32() -> None:
    plan = ParallelPlan(dp=8, mbs=1, gbs=8, seq=4096, zero=3, framework="torchtitan")
    fwd, bwd = _pass(plan, True), _pass(plan, False)
    lp = TINY.layer_params()
    copy = fwd["name"] == "layer1.fsdp_copy_out"
    assert copy.sum() == 1 and fwd["stream"][copy][0] == COMPUTE
    assert fwd["nbytes"][copy][0] == 4 * lp
    rs = bwd["name"] == "layer1.grad_reduce_scatter"
    assert bwd["csize"][rs][0] == 4 * lp  # FP32
    copy_in = bwd["name"] == "layer1.fsdp_copy_in"
    assert bwd["stream"][copy_in][0] == DP_STREAM and bwd["nbytes"][copy_in][0] == 6 * lp
    mega = _pass(dataclasses.replace(plan, framework="megatron"), False)
    assert mega["csize"][mega["name"] == "layer1.grad_reduce_scatter"][0] == 2 * lp
    assert "layer1.fsdp_copy_in" not in set(mega["name"])


def test_async_tp_overlaps_only_the_forward_and_holds_no_sms() -> None:
    """PyTorch async TP: the forward's all-gather / reduce-scatter GEMMs in TP chunks on
    all SMs; the backward keeps plain collectives, and DTensor reduce-scatters dgrad after
    wgrad with no input re-gather (Megatron re-gathers under dgrad, reduces under wgrad)."""
    plan = ParallelPlan(tp=4, mbs=1, gbs=1, seq=4096, zero=0, tp_comm_overlap=True)
    titan = dataclasses.replace(plan, framework="torchtitan-compile")
    model = dataclasses.replace(TINY, kv_heads=4)  # TP 4 splits the query groups
    fwd = _pass(titan, True, model)
    proj = fwd["name"] == "layer0.proj"
    assert proj.sum() == 4  # TP chunks
    assert fwd["dur"][proj][0] == pytest.approx(round(KM.gemm_ns(1024, 1024, 256)), abs=1)
    bwd_t, bwd_m = _pass(titan, False, model), _pass(plan, False, model)
    assert (bwd_t["name"] == "layer0.fc2.dgrad").sum() == 1
    assert (bwd_m["name"] == "layer0.fc2.dgrad").sum() == 4
    assert "layer0.qkv.input_all_gather" in set(bwd_m["name"])
    assert "layer0.qkv.input_all_gather" not in set(bwd_t["name"])
    order = list(bwd_t["name"])
    assert order.index("layer0.qkv.dgrad_reduce") > order.index("layer0.qkv.wgrad")
    order = list(bwd_m["name"])
    assert order.index("layer0.qkv.dgrad_reduce") < order.index("layer0.qkv.wgrad")


def test_selective_op_policy_reruns_half_the_matmuls_not_attention() -> None:
    plan = ParallelPlan(mbs=1, gbs=1, seq=4096, zero=0, recompute=Recompute.SELECTIVE)
    titan = _pass(dataclasses.replace(plan, framework="torchtitan"), False)
    mega = _pass(plan, False)
    assert "layer0.attention_bwd.recompute" in set(mega["name"])
    assert "layer0.attention_bwd.recompute" not in set(titan["name"])
    fc2 = _node(titan, "layer0.recompute.fc2")
    assert fc2 == pytest.approx(round(KM.gemm_ns(2048, 1024, 3584)), abs=1)
    gen = Generator(TINY, dataclasses.replace(plan, framework="torchtitan"), KM)
    # per layer (the whole step also holds torchtitan's eager loss, 12 B a logit, not 8)
    per_layer = layer_activation_bytes(Generator(TINY, plan, KM).ctx)
    assert layer_activation_bytes(gen.ctx) < per_layer


def test_torchao_fp8_casts_every_linear_input_and_transposes_for_wgrad() -> None:
    plan = ParallelPlan(mbs=1, gbs=1, seq=4096, zero=0, precision=Precision.FP8)
    te, titan = _pass(plan, True), _pass(dataclasses.replace(plan, framework="torchtitan"), True)
    assert "layer0.qkv.cast_fp8" not in set(te["name"])  # fused into TE's norm
    T, h = 4096, 1024
    assert _node(titan, "layer0.qkv.cast_fp8", "nbytes") == 3 * 3 * T * h  # q, k, v each
    compiled = _pass(dataclasses.replace(plan, framework="torchtitan-compile"), True)
    assert _node(compiled, "layer0.qkv.cast_fp8", "nbytes") == 3 * T * h  # CSE: one cast
    bwd = _pass(dataclasses.replace(plan, framework="torchtitan-compile"), False)
    assert _node(bwd, "layer0.fc2.transpose_fp8", "nbytes") == 2 * T * (3584 + h)
    # the "op" policy does not save the casts: they re-run with the recomputed ops
    sel = dataclasses.replace(plan, framework="torchtitan-compile", recompute=Recompute.SELECTIVE)
    assert _node(_pass(sel, False), "layer0.recompute.fc1.cast_fp8", "nbytes") == 3 * T * h


def test_torchtitan_h100_is_slower_in_tensor_work_and_hbm() -> None:
    """H100 SXM5 96GB HBM2e at 500 W: compute-bound GEMMs at 0.72 / 0.80 of the SXM5's
    sustained clock, memory-bound kernels at 2.4 / 3.35 TB/s."""
    km = KernelModel.for_gpu(load_system("h100-96gb-500w").gpu)
    big = (8192, 8192, 8192)
    assert km.gemm_ns(*big) / KM.gemm_ns(*big) == pytest.approx(0.80 / 0.72, rel=0.02)
    assert km.memory_ns(1e9, overhead=False) / KM.memory_ns(1e9, overhead=False) == (
        pytest.approx(3350 / 2400)
    )
    assert load_system("h100-96gb-500w").gpu.hbm_capacity_gb == 96


def test_h200_is_the_h100_die_with_faster_hbm() -> None:
    """H200 SXM (NVIDIA datasheet): the H100 SXM5's tensor peaks, clocks and 700 W, so the
    same compute-bound GEMM time; HBM3e at 4.8 TB/s for memory-bound kernels; 141 GB."""
    km = KernelModel.for_gpu(load_system("h200").gpu)
    big = (8192, 8192, 8192)
    assert km.gemm_ns(*big) == pytest.approx(KM.gemm_ns(*big), rel=0.01)
    assert km.memory_ns(1e9, overhead=False) / KM.memory_ns(1e9, overhead=False) == (
        pytest.approx(3350 / 4800)
    )
    system = load_system("h200")
    assert (system.gpu.hbm_capacity_gb, system.node.gpus_per_node) == (141, 8)


def test_cli_framework_option_is_the_plan_field() -> None:
    args = ["estimate", "--model", "llama3-8b", "--dp", "8", "--seq", "4096", "--zero", "3"]
    out = CliRunner().invoke(cli, [*args, "--framework", "torchtitan", "--json"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)["result"]
    assert result["plan"]["framework"] == "torchtitan"
    direct = estimate(
        "llama3-8b", ParallelPlan(dp=8, gbs=8, seq=4096, zero=3, framework="torchtitan"), "h100"
    )
    assert result["iteration_time_s"] == pytest.approx(direct.iteration_time_s, abs=1e-6)
    bad = CliRunner().invoke(cli, [*args, "--framework", "jax"])
    assert bad.exit_code != 0 and "'jax' is not one of" in bad.output
    assert set(PROFILES) == {
        "megatron",
        "torchtitan",
        "torchtitan-compile",
        "olmo-core",
        "hf-eager",
        "automodel",
        "llm-foundry",
    }
