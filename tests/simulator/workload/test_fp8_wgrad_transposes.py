"""Transformer Engine's FP8 operand preparation for the weight-gradient GEMMs
(`simulator/workload/fp8.py`), named after the mechanism, on a hand-made dense Llama-shaped
model and a small MoE model: Hopper's FP8 GEMMs take only TN operands, so every FP8
weight gradient reads the FP8 transposes of its input and output gradient — TE writes them
with the casts (cast-transpose, 4 B / element) or transposes the saved FP8 tensor before
the GEMM (`tex.fp8_transpose`, 2 B / element). BF16 runs none of it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload import ParallelPlan, Precision
from lumos.simulator.workload.spec import model_from_dict
from tests.simulator.workload.passes import node_value, stage0_pass
from tests.simulator.workload.tiny_models import small_moe

KM = KernelModel.for_gpu(load_system("h100").gpu)
T, H, HEADS, KV, FFN = 2048, 1024, 8, 4, 4096
LLAMA = model_from_dict(
    {
        "layers": 2,
        "hidden": H,
        "heads": HEADS,
        "kv_heads": KV,
        "ffn": FFN,
        "vocab": 32000,
        "mlp": "swiglu",
        "norm": "rmsnorm",
    },
    "tiny-llama",
)
QKV = (HEADS + 2 * KV) * H // HEADS  # q, k and v widths together


def _plan(tp: int = 1, fp8: bool = True, **kw: object) -> ParallelPlan:
    precision = Precision.FP8 if fp8 else Precision.BF16
    return ParallelPlan(tp=tp, mbs=1, gbs=1, seq=T, zero=0, precision=precision, **kw)  # type: ignore[arg-type]


def _names(plan: ParallelPlan, forward: bool) -> set[str]:
    return set(stage0_pass(LLAMA, plan, KM, forward)["name"])


def test_fp8_wgrad_transposes_the_norm_fused_inputs() -> None:
    """TE's LayerNormLinear quantises QKV's and FC1's input inside the norm and transposes
    the saved (gathered) FP8 input before the weight gradient (`ln_out_total_t =
    tex.fp8_transpose(ln_out_total)`): read and write FP8, 2 B per [T, h] element."""
    bwd = stage0_pass(LLAMA, _plan(), KM, False)
    assert node_value(bwd, "layer0.qkv.transpose_fp8", "nbytes") == 2 * T * H
    assert node_value(bwd, "layer0.fc1.transpose_fp8", "nbytes") == 2 * T * H
    assert not any(n.endswith("_fp8") for n in _names(_plan(fp8=False), False))


def test_fp8_wgrad_grad_casts_write_the_transpose() -> None:
    """Each output gradient is cast with its FP8 transpose in one pass
    (`fp8_cast_transpose_fused`: read BF16, write FP8 twice, 4 B / element)."""
    bwd = stage0_pass(LLAMA, _plan(), KM, False)
    assert node_value(bwd, "layer0.fc2.grad.cast_fp8", "nbytes") == 4 * T * H
    assert node_value(bwd, "layer0.fc1.grad.cast_fp8", "nbytes") == 4 * T * 2 * FFN
    assert node_value(bwd, "layer0.proj.grad.cast_fp8", "nbytes") == 4 * T * H
    assert node_value(bwd, "layer0.qkv.grad.cast_fp8", "nbytes") == 4 * T * QKV


def test_fp8_wgrad_fc2_casts_its_own_input() -> None:
    """Megatron-Core's MLP runs SwiGLU in BF16 between its TE linears, so FC2's
    `TERowParallelLinear` casts the activation output itself: cast-transposed without
    sequence parallelism (4 B), cast alone under it (3 B of the local width) with the
    transpose before the weight gradient — the output projection's input alike."""
    fwd = stage0_pass(LLAMA, _plan(), KM, True)
    assert node_value(fwd, "layer0.fc2.cast_fp8", "nbytes") == 4 * T * FFN
    assert node_value(fwd, "layer0.proj.cast_fp8", "nbytes") == 4 * T * H
    assert "layer0.fc2.transpose_fp8" not in _names(_plan(), False)
    sp = _plan(tp=2, sequence_parallel=True)
    fwd = stage0_pass(LLAMA, sp, KM, True)
    assert node_value(fwd, "layer0.fc2.cast_fp8", "nbytes") == 3 * T * FFN // 2
    bwd = stage0_pass(LLAMA, sp, KM, False)
    assert node_value(bwd, "layer0.fc2.transpose_fp8", "nbytes") == 2 * T * FFN // 2
    assert node_value(bwd, "layer0.proj.transpose_fp8", "nbytes") == 2 * T * H // 2


def test_fp8_wgrad_userbuffers_gradient_cast_on_the_shard() -> None:
    """Under the userbuffers all-gather overlap of a row-parallel linear's backward TE casts
    only the local gradient shard into the FP8 buffer it all-gathers, and transposes the
    gathered FP8 gradient after the data gradient (`grad_output_t =
    tex.fp8_transpose(grad_output_c)`), with the saved input's transpose."""
    ub = _plan(tp=4, sequence_parallel=True, tp_comm_overlap=True)
    bwd = stage0_pass(LLAMA, ub, KM, False)
    assert node_value(bwd, "layer0.fc2.grad.cast_fp8", "nbytes") == 3 * T * H // 4
    want = 2 * (T * FFN // 4 + T * H)
    assert node_value(bwd, "layer0.fc2.transpose_fp8", "nbytes") == want
    plain = dataclasses.replace(ub, tp_comm_overlap=False)  # gathered BF16, cast-transposed
    bwd = stage0_pass(LLAMA, plain, KM, False)
    assert node_value(bwd, "layer0.fc2.grad.cast_fp8", "nbytes") == 4 * T * H


@pytest.mark.parametrize("framework", ["torchtitan", "torchtitan-compile"])
def test_fp8_wgrad_torchao_keeps_its_own_operand_copies(framework: str) -> None:
    """torchao prices its own casts (3 B) and the column-major copies of both wgrad
    operands (`elementwise.wgrad_transposes`, one node): no TE transposes besides."""
    plan = _plan(framework=framework)
    bwd = stage0_pass(LLAMA, plan, KM, False)
    assert node_value(bwd, "layer0.fc2.grad.cast_fp8", "nbytes") == 3 * T * H
    assert node_value(bwd, "layer0.qkv.transpose_fp8", "nbytes") == 2 * T * (QKV + H)


def test_fp8_wgrad_grouped_experts_cast_transpose_both_inputs() -> None:
    """TE's GroupedLinear casts each grouped GEMM's input with its transpose
    (`fp8_multi_cast_transpose_fused`): FC1's and, after Megatron-Core's BF16 activation,
    FC2's; the gradients likewise (4 B / element)."""
    moe = small_moe()
    plan = ParallelPlan.build(
        moe, mbs=1, dp=4, gbs=4, seq=16, ep=4, precision=Precision.FP8, moe_load_factor=1.0
    )
    fwd = stage0_pass(moe, plan, KM, True)
    rows = 16 * 2  # tokens x top-k (the mean load, stated: what each rank's experts receive)
    assert node_value(fwd, "layer0.moe.fc1.cast_fp8", "nbytes") == 4 * rows * 64
    assert node_value(fwd, "layer0.moe.fc2.cast_fp8", "nbytes") == 4 * rows * 32
    bwd = stage0_pass(moe, plan, KM, False)
    assert node_value(bwd, "layer0.moe.fc1.grad.cast_fp8", "nbytes") == 4 * rows * 64
    assert np.isclose(node_value(bwd, "layer0.moe.fc2.grad.cast_fp8", "nbytes"), 4 * rows * 64)
