"""The `llm-foundry` framework profile (MosaicML llm-foundry MPT under Composer and PyTorch
FSDP1; sources in `simulator/workload/framework.py` and docs/estimate.md, "Framework
kernel profiles"): each switch on a two-layer MPT-shaped model (LayerNorm, GeLU, learned
positions, tied embeddings), against the default Megatron/TE profile."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload import ParallelPlan, Precision
from lumos.simulator.workload.block import DP_STREAM
from lumos.simulator.workload.dims import padded_vocab
from lumos.simulator.workload.framework import ATTENTION, FUSED_LOSS_BYTES, PROFILES
from lumos.simulator.workload.spec import ModelSpec, model_from_dict
from tests.simulator.workload.passes import node_value, stage0_pass

KM = KernelModel.for_gpu(load_system("h100").gpu)
MPT = model_from_dict(
    {
        "layers": 2,
        "hidden": 1024,
        "heads": 8,
        "ffn": 4096,
        "vocab": 50368,
        "mlp": "gelu",
        "norm": "layernorm",
        "position": "learned",
        "tied_embeddings": True,
        "seq": 2048,
    },
    "tiny-mpt",
)
T, H, FFN, V = 2048, 1024, 4096, 50368


def _pass(plan: ParallelPlan, forward: bool, model: ModelSpec = MPT) -> dict[str, np.ndarray]:
    """One chunk pass of stage 0 (the whole model: embedding, layers, loss)."""
    return stage0_pass(model, plan, KM, forward)


_node = node_value


def _plans(**kw: object) -> tuple[ParallelPlan, ParallelPlan]:
    mega = ParallelPlan(mbs=1, gbs=1, seq=T, zero=0, **kw)  # type: ignore[arg-type]
    return mega, dataclasses.replace(mega, framework="llm-foundry")


def test_foundry_fsdp1_casts_grads_to_fp32_and_predivides_before_an_fp32_reduce_scatter() -> None:
    """Composer `mixed_precision: DEFAULT` (reduce dtype FP32): FSDP1's post-backward hook
    casts the unsharded BF16 gradient to FP32 (6 B a parameter) and pre-divides it in place
    (8 B) on the post-backward stream; the reduce-scatter moves FP32. Parameters are views
    of the gathered flat buffer: no FSDP2 copy-out in the forward."""
    plan = ParallelPlan(dp=8, mbs=1, gbs=8, seq=T, zero=3, framework="llm-foundry")
    fwd, bwd = _pass(plan, True), _pass(plan, False)
    lp = MPT.layer_params()
    assert "layer1.fsdp_copy_out" not in set(fwd["name"])
    cast = bwd["name"] == "layer1.fsdp_grad_cast"
    assert cast.sum() == 1 and bwd["stream"][cast][0] == DP_STREAM
    assert bwd["nbytes"][cast][0] == (6 + 8) * lp
    rs = bwd["name"] == "layer1.grad_reduce_scatter"
    assert bwd["csize"][rs][0] == 4 * lp
    mega = _pass(dataclasses.replace(plan, framework="megatron"), False)
    assert mega["csize"][mega["name"] == "layer1.grad_reduce_scatter"][0] == 2 * lp
    assert "layer1.fsdp_grad_cast" not in set(mega["name"])


def test_foundry_fused_cross_entropy_reads_the_bf16_logits_once() -> None:
    """`loss_fn: fused_crossentropy` (llm-foundry's default): flash_attn's kernel reads the
    BF16 logits once forward and reads + writes them backward (2 / 4 B a logit), against
    Megatron's vocab-parallel 14 / 6 over the vocabulary Megatron pads to a multiple of 128
    (MPT's 50,368 -> 50,432; llm-foundry builds it unpadded)."""
    mega, foundry = _plans()
    fwd, bwd = _pass(foundry, True), _pass(foundry, False)
    assert _node(fwd, "cross_entropy", "nbytes") == FUSED_LOSS_BYTES[0] * T * V == 2 * T * V
    assert _node(bwd, "cross_entropy_bwd", "nbytes") == FUSED_LOSS_BYTES[1] * T * V == 4 * T * V
    assert _node(_pass(mega, True), "cross_entropy", "nbytes") == 14 * T * padded_vocab(V, 1, 128)


def test_foundry_flash_attention_2_is_priced_at_the_fa2_ratio() -> None:
    """`attn_impl: flash` (FlashAttention-2): the torchtitan profile's FA2 / cuDNN ratios."""
    mega, foundry = _plans()
    over = KM.physics.kernel_overhead_ns
    for forward, name, i in ((True, "layer0.attention", 0), (False, "layer0.attention_bwd", 1)):
        fa3, fa2 = _pass(mega, forward), _pass(foundry, forward)
        ratio = (_node(fa2, name) - over) / (_node(fa3, name) - over)
        assert ratio == pytest.approx(1 / ATTENTION["fa2"][i], rel=1e-3)
    assert PROFILES["llm-foundry"].attention == PROFILES["torchtitan"].attention == "fa2"


def test_foundry_layernorm_gelu_and_positions_stay_single_kernels() -> None:
    """`low_precision_layernorm` is one native `F.layer_norm` kernel in BF16 and GeLU one op:
    the fused byte counts (4 B / element each way through the norm, 4 B / FFN element for
    the activation); learned positions run no RoPE kernel."""
    mega, foundry = _plans()
    m, f = _pass(mega, True), _pass(foundry, True)
    assert _node(f, "layer0.norm1", "nbytes") == _node(m, "layer0.norm1", "nbytes") == 4 * T * H
    assert _node(f, "layer0.activation", "nbytes") == 4 * T * FFN
    assert "layer0.rope" not in set(f["name"])


def test_foundry_te_linear_casts_each_input_alone() -> None:
    """`fc_type: te` under `te.fp8_autocast`: the QKV, FC1 and FC2 `te.Linear`s each cast
    their BF16 input to FP8 with its transpose for the weight gradient in one pass (TE's
    `fp8_cast_transpose_fused`: 4 B / element; one cast for the fused Wqkv), which
    Megatron's TE LayerNormLinear does inside the norm; TE's cast-transpose needs no
    separate weight-gradient transposes (torchao's, Megatron's `fp8_transpose`)."""
    mega, foundry = _plans(precision=Precision.FP8)
    te, fwd = _pass(mega, True), _pass(foundry, True)
    assert "layer0.qkv.cast_fp8" not in set(te["name"])
    assert _node(fwd, "layer0.qkv.cast_fp8", "nbytes") == 4 * T * H
    assert _node(fwd, "layer0.fc1.cast_fp8", "nbytes") == 4 * T * H
    assert _node(fwd, "layer0.fc2.cast_fp8", "nbytes") == 4 * T * FFN
    bwd = _pass(foundry, False)
    assert not any(n.endswith("transpose_fp8") for n in bwd["name"])


def test_foundry_te_linear_recasts_its_weights_every_forward() -> None:
    """MPT calls its `te.Linear`s without `is_first_microbatch`, so each forward (and each
    recomputed forward) re-casts the layer's BF16 weights to FP8 and their transpose
    (read 2 B, write 1 + 1 a parameter); Megatron caches them across micro-batches."""
    mega, foundry = _plans(precision=Precision.FP8)
    assert not any(n.endswith("weight_cast_fp8") for n in _pass(mega, True)["name"])
    lp = MPT.layer_params()
    assert _node(_pass(foundry, True), "layer0.weight_cast_fp8", "nbytes") == 4 * lp
    bf16 = dataclasses.replace(foundry, precision=Precision.BF16)
    assert not any(n.endswith("weight_cast_fp8") for n in _pass(bf16, True)["name"])


def test_foundry_unpad_and_pad_copies_around_the_varlen_flash_kernel() -> None:
    """`flash_attn_fn` gathers q, k, v to unpadded tokens (`index_first_axis`: 4 B / element)
    and scatters the output back (`pad_input`: zeros + index_put, 6 B); backward gathers
    the output gradient (4 B) and scatters dq, dk, dv into zeros, concatenated by the Wqkv
    split's backward (10 B). Megatron's TE attention reads the QKV projection in place."""
    mega, foundry = _plans()
    fwd, bwd = _pass(foundry, True), _pass(foundry, False)
    assert _node(fwd, "layer0.attention.unpad", "nbytes") == 4 * T * 3 * H
    assert _node(fwd, "layer0.attention.pad", "nbytes") == 6 * T * H
    assert _node(bwd, "layer0.attention_bwd.pad", "nbytes") == 4 * T * H
    assert _node(bwd, "layer0.attention_bwd.unpad", "nbytes") == 10 * T * 3 * H
    order = list(fwd["name"])
    assert order.index("layer0.attention.unpad") < order.index("layer0.attention")
    assert order.index("layer0.attention") < order.index("layer0.attention.pad")
    assert not any(n.endswith((".unpad", ".pad")) for n in _pass(mega, True)["name"])


def test_foundry_bf16_linear_bias_gradients_are_their_own_reduction() -> None:
    """MPT's linears carry biases (the benchmark's NumParams: `no_bias` false); autograd
    sums each BF16 `nn.Linear`'s output gradient over the tokens in its own kernel (2 B an
    element); TE's FP8 `te.Linear` fuses it into its cast-transpose, Megatron/TE into the
    GEMM epilogue."""
    biased = dataclasses.replace(MPT, bias=True)
    mega, foundry = _plans()
    bwd = _pass(foundry, False, biased)
    assert _node(bwd, "layer0.qkv.bgrad", "nbytes") == 2 * T * 3 * H
    assert _node(bwd, "layer0.proj.bgrad", "nbytes") == 2 * T * H
    assert _node(bwd, "layer0.fc1.bgrad", "nbytes") == 2 * T * FFN
    assert _node(bwd, "layer0.fc2.bgrad", "nbytes") == 2 * T * H
    assert "output.bgrad" not in set(bwd["name"])
    for plan, model in ((foundry, MPT), (mega, biased)):
        assert not any(n.endswith(".bgrad") for n in _pass(plan, False, model)["name"])
    fp8 = dataclasses.replace(foundry, precision=Precision.FP8)
    assert not any(n.endswith(".bgrad") for n in _pass(fp8, False, biased)["name"])
