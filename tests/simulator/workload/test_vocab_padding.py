"""Megatron pads the vocabulary to a multiple of `make_vocab_size_divisible_by` (128) x TP
(NVIDIA/Megatron-LM megatron/training/tokenizer/tokenizer.py `_vocab_size_with_padding`
@ 00ee966); the padded rows are real embedding / output rows, priced as such, but not the
model's parameters. torchtitan and Hugging Face models split the vocabulary as it is."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload import ParallelPlan, estimate
from lumos.simulator.workload.dims import Ctx, padded_vocab
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.spec import load_model

KM = KernelModel.for_gpu(load_system("h100").gpu)
LLAMA3 = load_model("llama3-8b")  # vocabulary 128,256
TP8 = ParallelPlan(tp=8, mbs=1, gbs=1, seq=4096, zero=0)


def test_megatron_pads_to_128_times_tp() -> None:
    """Llama 3's 128,256 at TP 8 -> 129,024 (a multiple of 1,024): 16,128 rows a rank (was
    16,032); at TP 2 it is already a multiple of 256; GPT-2's 50,257 at TP 1 -> 50,304."""
    assert padded_vocab(128256, 8, 128) == 129024
    assert padded_vocab(128256, 2, 128) == 128256
    assert padded_vocab(50257, 1, 128) == 50304
    assert Ctx.make(LLAMA3, TP8, KM).vocab == 16128
    assert Ctx.make(LLAMA3, dataclasses.replace(TP8, tp=2), KM).vocab == 64128


def test_torch_native_and_stated_multiple_do_not_pad() -> None:
    """torchtitan splits the vocabulary as it is (ceil(V / TP) rows a rank); a plan may
    state its own multiple (`vocab_multiple` 1: none, as MaxText / Hugging Face)."""
    titan = dataclasses.replace(TP8, framework="torchtitan", zero=1)
    assert Ctx.make(LLAMA3, titan, KM).vocab == 16032
    assert Ctx.make(LLAMA3, dataclasses.replace(TP8, vocab_multiple=1), KM).vocab == 16032
    assert Ctx.make(LLAMA3, dataclasses.replace(TP8, vocab_multiple=64), KM).vocab == 16064
    for bad in (-1, 10**15):  # 10**15 was a SimulationError blaming mbs x seq x hidden
        with pytest.raises(ConfigError, match="vocab_multiple must be 0"):
            dataclasses.replace(TP8, vocab_multiple=bad).check(LLAMA3)


def _node(plan: ParallelPlan, name: str) -> tuple[float, float]:
    gen = Generator(LLAMA3, plan, KM)
    blk = gen.block(0, 0, True)
    names = np.asarray(gen.names.as_list())[blk.name]
    (i,) = np.flatnonzero(names == name)
    return float(blk.cols["flops"][i]), float(blk.cols["nbytes"][i])


def test_output_gemm_loss_and_weights_price_the_padded_rows() -> None:
    """The output GEMM's FLOPs and the loss's bytes grow by 129,024 / 128,256 at TP 8;
    the weights held grow by the padded rows; the model's parameter count does not."""
    plain = dataclasses.replace(TP8, vocab_multiple=1)
    ratio = 16128 / 16032
    for node in ("output", "cross_entropy"):
        padded, unpadded = _node(TP8, node), _node(plain, node)
        assert padded[0] == pytest.approx(unpadded[0] * ratio)
        assert padded[1] > unpadded[1]
    a, b = estimate("llama3-8b", TP8), estimate("llama3-8b", plain)
    rows = 2 * (16128 - 16032) * 4096  # embedding and the untied output layer
    assert (a.memory.weights_gb - b.memory.weights_gb) * 1e9 == pytest.approx(rows * 2, rel=0.01)
    assert LLAMA3.params() == 8_030_261_248


def test_estimate_states_the_padding() -> None:
    """The estimate names the padded vocabulary; an unpadded one says nothing."""
    notes = estimate("llama3-8b", TP8).assumptions
    assert any("vocabulary padded 128,256 -> 129,024" in n for n in notes)
    two = dataclasses.replace(TP8, tp=2)
    assert not any("vocabulary padded" in n for n in estimate("llama3-8b", two).assumptions)
