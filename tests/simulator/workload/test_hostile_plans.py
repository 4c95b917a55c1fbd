"""Hostile and odd plans on real configs (`tests/data/model_configs`): every plan a model
cannot take is a typed refusal naming the field (never a hang, a traceback or an answer
for something else), and the odd plans that are fine give sane outputs."""

from __future__ import annotations

from typing import Any

import pytest

from lumos.api import estimate
from lumos.errors import ConfigError, LumosError, ResourceLimitError
from tests.simulator.workload.model_battery import CONFIGS

#: (label, model, plan, error type, what the message names)
REFUSED: list[tuple[str, str, dict[str, Any], type[LumosError], str]] = [
    ("tp-heads", "SmolLM-360M", {"tp": 2}, ConfigError, r"tp 2 must divide heads \(15\)"),
    ("tp-ffn", "Qwen2-7B", {"tp": 7}, ConfigError, r"tp 7 must divide ffn \(18944\)"),
    ("tp-kv-heads", "Qwen3-0.6B", {"tp": 16}, ConfigError, "must divide the 8 key/value heads"),
    ("tp-mla-heads", "DeepSeek-V2-Lite", {"tp": 32}, ConfigError, r"must divide heads \(16\)"),
    ("pp-layers", "Llama-3.2-1B", {"pp": 32, "gbs": 32}, ConfigError, "16 layers cannot fill"),
    ("vp-no-pp", "Llama-3.2-1B", {"vp": 2, "gbs": 2}, ConfigError, "vp 2 needs pp > 1"),
    (
        "vp-microbatches",
        "Llama-3.2-1B",
        {"pp": 4, "vp": 2, "gbs": 6},
        ConfigError,
        r"micro-batches \(6\) to be a multiple of pp \(4\)",
    ),
    ("cp-seq", "Llama-3.2-1B", {"cp": 2, "seq": 1001}, ConfigError, "seq 1001 must divide"),
    ("ep-dense", "Llama-3.2-1B", {"ep": 2, "dp": 2, "gbs": 2}, ConfigError, "ep / etp need"),
    ("ep-experts", "Qwen1.5-MoE-A2.7B", {"ep": 8, "dp": 8, "gbs": 8}, ConfigError, "60 experts"),
    ("gbs", "Llama-3.2-1B", {"dp": 8, "gbs": 12}, ConfigError, "gbs 12 is not a multiple"),
    ("zero3-pp", "Qwen3-8B", {"zero": 3, "pp": 2, "gbs": 2}, ConfigError, r"zero 3 \(FSDP\)"),
    ("zero4", "Qwen3-8B", {"zero": 4}, ConfigError, "zero must be 0, 1, 2 or 3"),
    (
        "moe-titan",
        "DeepSeek-V2-Lite",
        {"framework": "torchtitan"},
        ConfigError,
        r"experts under torchtitan are modelled with FSDP2 \(zero 3",
    ),
    ("huge-gbs", "Llama-3.2-1B", {"gbs": 8 * 10**9}, ResourceLimitError, "micro-batches"),
    ("huge-world", "Llama-3.2-1B", {"dp": 10**7, "gbs": 10**7}, ResourceLimitError, "world"),
]


@pytest.mark.parametrize(
    ("model", "plan", "error", "names"),
    [r[1:] for r in REFUSED],
    ids=[r[0] for r in REFUSED],
)
def test_plan_the_model_cannot_take_is_refused_naming_the_field(
    model: str, plan: dict[str, Any], error: type[LumosError], names: str
) -> None:
    with pytest.raises(error, match=rf"^plan: .*{names}"):
        estimate(CONFIGS / f"{model}.json", hw="h100", **{"seq": 1024, **plan})


def test_seq_past_llama4_attention_chunk_is_refused() -> None:
    """llama4-scout at seq 16384 was priced as full causal attention over 16k keys, where
    Llama 4's chunked layers see at most their own 8192-token chunk."""
    plan = {"tp": 2, "pp": 4, "ep": 8, "dp": 8, "gbs": 64}
    with pytest.raises(ConfigError, match=r"seq 16384 is longer than llama4-scout's attention"):
        estimate("llama4-scout", hw="h100", seq=16384, **plan)
    assert estimate("llama4-scout", hw="h100", seq=8192, **plan).iteration_time_s > 0


#: (label, model, plan) that are odd but valid
ODD: list[tuple[str, str, dict[str, Any]]] = [
    ("15-heads-tp5", "SmolLM-360M", {"tp": 5, "gbs": 8, "mbs": 8, "seq": 2560}),  # SP: 5 | seq
    ("vocab-49155-tp2", "granite-3.0-8b-base", {"tp": 2, "dp": 4, "gbs": 8}),
    ("vocab-32016-tp8", "CodeLlama-34b-hf", {"tp": 8, "pp": 2, "gbs": 8}),
    ("cp-3", "Llama-3.2-1B", {"cp": 3, "seq": 6144}),
    ("odd-seq", "Llama-3.2-1B", {"seq": 1001}),
    ("uneven-pp", "Llama-3.2-3B", {"pp": 3, "gbs": 6}),
    ("window-past-seq", "starcoder2-7b", {"tp": 4, "seq": 1024}),
    ("kv-1-tp1", "gemma-2b", {"dp": 2, "gbs": 2, "seq": 8192}),
]


@pytest.mark.parametrize(("model", "plan"), [r[1:] for r in ODD], ids=[r[0] for r in ODD])
def test_odd_but_valid_plan_gives_sane_outputs(model: str, plan: dict[str, Any]) -> None:
    r = estimate(CONFIGS / f"{model}.json", hw="h100", **{"seq": 2048, **plan})
    assert 0.0 < r.mfu < 0.8 and r.memory.total_gb > 0
    tokens = r.tokens_per_s_per_gpu * r.gpus * r.iteration_time_s
    assert tokens == pytest.approx(r.plan.gbs * r.plan.seq, rel=1e-3)


def test_phi3_sliding_window_is_priced() -> None:
    """Phi-3-mini-4k's 2047-key window on every layer makes a 4096-token step cheaper than
    Phi-3.5-mini's (the same shape, a window longer than any sequence)."""
    plan = {"dp": 8, "gbs": 8, "seq": 4096}
    windowed = estimate(CONFIGS / "Phi-3-mini-4k-instruct.json", hw="h100", **plan)
    full = estimate(CONFIGS / "Phi-3.5-mini-instruct.json", hw="h100", **plan)
    assert windowed.iteration_time_s < 0.97 * full.iteration_time_s
