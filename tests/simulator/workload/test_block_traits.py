"""Block traits beyond the pre-norm Llama block (`hf_block`, `ModelSpec`): Gemma 2 / 3's
norms after attention and MLP, QK-norm (Gemma 3, Qwen3), Gemma 2's soft-capped logits, and
Gemma 3's local layers with a global one every sixth — each priced as the kernels it adds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.simulator.workload import ParallelPlan, estimate
from lumos.simulator.workload.dims import BF16
from lumos.simulator.workload.spec import ModelSpec, load_model, model_from_dict
from tests.simulator.workload.model_battery import CONFIGS
from tests.simulator.workload.passes import stage0_pass
from tests.simulator.workload.test_framework import KM
from tests.simulator.workload.tiny_models import TINY_LLAMA

PLAN = ParallelPlan(tp=2, dp=1, mbs=1, gbs=1, seq=2048, zero=0)
BASE = model_from_dict({**TINY_LLAMA, "seq": 2048}, "tiny")


def _names(model: ModelSpec, forward: bool) -> list[str]:
    return [str(n) for n in stage0_pass(model, PLAN, KM, forward)["name"]]


def _bytes(model: ModelSpec, forward: bool, name: str) -> float:
    cols = stage0_pass(model, PLAN, KM, forward)
    return float(cols["nbytes"][np.flatnonzero(cols["name"] == name)[0]])


def test_post_norms_add_a_norm_after_attention_and_after_the_mlp() -> None:
    gemma = dataclasses.replace(BASE, post_norms=True)
    fwd, base = _names(gemma, True), _names(BASE, True)
    assert len(fwd) - len(base) == 2 * BASE.layers
    assert fwd.index("layer0.post_attn_norm") < fwd.index("layer0.residual1")
    assert fwd.index("layer0.post_mlp_norm") < fwd.index("layer0.residual2")
    bwd = _names(gemma, False)
    assert {"layer0.post_mlp_norm_bwd", "layer0.post_attn_norm_bwd"} <= set(bwd)
    # a norm over the sequence-parallel shard, as the pre-norms
    t_sp, h = PLAN.seq // PLAN.tp, BASE.hidden
    assert _bytes(gemma, True, "layer0.post_attn_norm") == t_sp * h * BF16 * 2
    assert gemma.params() - BASE.params() == 2 * h * BASE.layers


def test_qk_norm_normalises_each_local_query_and_key_head() -> None:
    qk = dataclasses.replace(BASE, qk_norm=True)
    heads, kv, d = BASE.heads // PLAN.tp, BASE.kv_heads // PLAN.tp, BASE.head_dim
    assert _bytes(qk, True, "layer0.qk_norm") == PLAN.seq * (heads + kv) * d * BF16 * 2
    assert _bytes(qk, False, "layer0.qk_norm_bwd") == PLAN.seq * (heads + kv) * d * BF16 * 3
    fwd = _names(qk, True)
    assert fwd.index("layer0.qkv") < fwd.index("layer0.qk_norm") < fwd.index("layer0.rope")


def test_logit_softcap_is_a_pass_over_the_local_logits() -> None:
    capped = dataclasses.replace(BASE, logit_softcap=True)
    plain = estimate(BASE, PLAN, "h100")
    more = estimate(capped, PLAN, "h100")
    assert more.iteration_time_s > plain.iteration_time_s
    assert more.memory is not None and plain.memory is not None
    local_logits = PLAN.seq * BASE.vocab // PLAN.tp
    grew = (more.memory.activations_gb - plain.memory.activations_gb) * 1e9
    assert grew == pytest.approx(local_logits * BF16, rel=1e-6)


def test_gemma3_takes_a_global_layer_every_sixth() -> None:
    """`sliding_window_pattern` 6: layers 5, 11, ... global (Gemma3DecoderLayer
    `is_sliding = bool((layer_idx + 1) % pattern)`), the rest over the 512-token window."""
    gemma3 = load_model(CONFIGS / "gemma-3-1b-it.json")
    assert (gemma3.window, gemma3.global_every) == (512, 6)
    assert gemma3.post_norms and gemma3.qk_norm and not gemma3.logit_softcap
    windowed = [i for i in range(12) if gemma3.is_window_layer(i)]
    assert windowed == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]
    gemma2 = load_model(CONFIGS / "gemma-2-9b.json")
    assert (gemma2.window, gemma2.window_every, gemma2.global_every) == (4096, 2, 0)
    assert gemma2.post_norms and gemma2.logit_softcap and not gemma2.qk_norm


def test_layer_types_read_either_window_pattern() -> None:
    base = {"model_type": "gemma3_text", "hidden_size": 512, "num_attention_heads": 4,
            "num_hidden_layers": 12, "intermediate_size": 1024, "vocab_size": 1000,
            "sliding_window": 64}  # fmt: skip
    local_global = ["sliding_attention"] * 5 + ["full_attention"]
    spec = model_from_dict({**base, "layer_types": local_global * 2}, "g3.json")
    assert spec.global_every == 6
    alternate = ["sliding_attention", "full_attention"] * 6
    spec = model_from_dict({**base, "layer_types": alternate}, "g2.json")
    assert (spec.window_every, spec.global_every) == (2, 0)
    odd = ["full_attention", "sliding_attention", "sliding_attention"] * 4
    with pytest.raises(ConfigError, match="layer_types' puts sliding-window layers"):
        model_from_dict({**base, "layer_types": odd}, "odd.json")


def test_a_gemma3_wrapper_reads_its_text_config_with_the_class_defaults() -> None:
    """Refused before; its text_config names no vocabulary or window pattern, which
    Gemma3TextConfig gives (262,208; a global layer every 6th)."""
    gemma3 = load_model(CONFIGS / "gemma-3-27b-pt.json")
    assert (gemma3.vocab, gemma3.global_every, gemma3.window) == (262_208, 6, 1024)
