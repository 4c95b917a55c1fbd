"""The model-config battery: real config.json files (`tests/data/model_configs`, sources in
its SOURCES.md), what each model's card or Hub page states as its size, a training plan of
the kind published runs use (H100, TP inside a node, PP for the large ones, FSDP for
torchtitan / OLMo-core style runs, FP8 on some), and the configs lumos must refuse with the
key (or model type) that says why."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "model_configs"


@dataclass(frozen=True)
class Case:
    """One accepted config: its file's stem, the published total (and active) size in
    billions (None: not checked, the size the card states is not precise enough), and a
    plan (`ParallelPlan` fields) that fits on H100s."""

    stem: str
    billions: float | None
    plan: dict[str, Any]
    active: float | None = None
    text_config: bool = field(default=False)  # the file is a wrapper: read its text_config


_FSDP = {"zero": 3, "framework": "torchtitan"}
ACCEPTED = [
    Case("Llama-2-7b-hf", 6.74, {"dp": 8, "gbs": 64, "seq": 4096, **_FSDP}),
    Case("Llama-2-70b-hf", 69.0, {"tp": 8, "pp": 4, "vp": 5, "dp": 4, "gbs": 128, "seq": 4096}),
    Case("CodeLlama-34b-hf", 33.7, {"tp": 8, "pp": 2, "dp": 2, "gbs": 32, "seq": 4096}),
    Case("Llama-3.2-1B", 1.24, {"dp": 8, "mbs": 2, "gbs": 64, "seq": 8192}),
    Case("Llama-3.2-3B", 3.21, {"tp": 2, "dp": 4, "gbs": 64, "seq": 8192, "precision": "fp8"}),
    Case("SmolLM-360M", 0.362, {"dp": 8, "mbs": 8, "gbs": 256, "seq": 2048}),
    Case("Mistral-7B-v0.3", 7.25, {"tp": 2, "dp": 4, "gbs": 32, "seq": 8192}),
    Case(
        "Mistral-Large-Instruct-2407",
        123.0,
        {"tp": 8, "pp": 8, "dp": 2, "gbs": 64, "seq": 4096, "recompute": "selective"},
    ),
    Case("gemma-2b", 2.51, {"dp": 8, "gbs": 64, "seq": 8192, **_FSDP}),
    Case("gemma-7b", 8.54, {"tp": 2, "dp": 4, "gbs": 32, "seq": 8192}),
    # Gemma 2 / 3: norms after attention and MLP, soft-capped logits (2), QK-norm and a
    # global layer every sixth (3); model cards: 2.61 B, 9.24 B, 27.2 B, 1 B
    Case("gemma-2-2b-it", 2.61, {"dp": 8, "gbs": 64, "seq": 8192}),
    Case("gemma-2-9b", 9.24, {"tp": 2, "dp": 4, "gbs": 32, "seq": 8192}),
    Case("gemma-2-27b", 27.2, {"tp": 4, "pp": 2, "dp": 4, "gbs": 64, "seq": 8192}),
    Case("gemma-3-1b-it", 1.0, {"dp": 8, "gbs": 64, "seq": 8192}),
    Case("Qwen2-0.5B", 0.494, {"dp": 8, "mbs": 8, "gbs": 256, "seq": 4096}),
    Case("Qwen2-7B", 7.62, {"tp": 4, "dp": 2, "gbs": 32, "seq": 4096}),
    Case("Qwen2.5-7B", 7.62, {"tp": 2, "dp": 4, "gbs": 32, "seq": 4096, "precision": "fp8"}),
    Case("Qwen2.5-14B", 14.8, {"tp": 4, "pp": 2, "dp": 2, "gbs": 32, "seq": 4096}),
    Case("Qwen2.5-32B", 32.8, {"tp": 8, "pp": 2, "dp": 2, "gbs": 32, "seq": 4096}),
    Case("Qwen3-0.6B", 0.6, {"dp": 8, "mbs": 4, "gbs": 64, "seq": 4096}),
    Case("Qwen3-4B", 4.02, {"tp": 2, "dp": 4, "gbs": 32, "seq": 4096}),
    Case("Qwen3-8B", 8.19, {"dp": 8, "gbs": 32, "seq": 4096, **_FSDP}),
    Case(
        "Qwen3-32B", 32.8, {"tp": 8, "pp": 2, "dp": 2, "gbs": 32, "seq": 4096, "precision": "fp8"}
    ),
    Case("Phi-3-mini-4k-instruct", 3.82, {"dp": 8, "gbs": 64, "seq": 4096}),
    Case("Phi-3.5-mini-instruct", 3.82, {"dp": 8, "gbs": 64, "seq": 4096}),
    Case("Phi-4-mini-instruct", 3.84, {"dp": 8, "gbs": 64, "seq": 4096}),
    Case("Phi-3-medium-4k-instruct", 14.0, {"tp": 2, "dp": 4, "gbs": 32, "seq": 4096}),
    Case("Yi-34B", 34.4, {"tp": 8, "pp": 2, "dp": 2, "gbs": 32, "seq": 4096}),
    Case(
        "OLMo-7B-hf", 6.89, {"dp": 16, "gbs": 64, "seq": 2048, "zero": 3, "framework": "olmo-core"}
    ),
    Case(
        "OLMo-2-1124-7B",
        7.30,
        {"dp": 16, "gbs": 64, "seq": 4096, "zero": 3, "framework": "olmo-core"},
    ),
    Case(
        "OLMo-2-1124-13B",
        13.7,
        {"dp": 32, "gbs": 128, "seq": 4096, "zero": 3, "framework": "olmo-core"},
    ),
    Case("Minitron-8B-Base", None, {"tp": 4, "dp": 2, "gbs": 16, "seq": 4096}),
    Case("granite-3.0-8b-base", 8.17, {"tp": 2, "dp": 4, "gbs": 32, "seq": 4096}),
    Case("starcoder2-7b", 7.17, {"tp": 4, "dp": 2, "gbs": 32, "seq": 4096}),
    Case("opt-66b", 66.0, {"tp": 8, "pp": 2, "dp": 4, "gbs": 64, "seq": 2048}),
    # parallel attention / MLP blocks (`parallel_layer`): Falcon's new decoder with two norms
    # (40B's card says only "40B"; 180B's "180B"), GPT-J's and Cohere's shared norm (cards:
    # GPT-J 6,053,381,344 parameters; Command R 35 B; Aya 23 8 B)
    Case("falcon-40b", None, {"tp": 8, "pp": 4, "dp": 2, "gbs": 32, "seq": 2048}),
    Case("falcon-180B", 180.0, {"tp": 8, "pp": 8, "dp": 4, "gbs": 64, "seq": 2048}),
    Case("gpt-j-6b", 6.05, {"tp": 2, "dp": 4, "gbs": 32, "seq": 2048}),
    Case("aya-23-8B", 8.03, {"tp": 2, "dp": 4, "gbs": 32, "seq": 8192}),
    Case("c4ai-command-r-v01", 35.0, {"tp": 8, "pp": 2, "dp": 2, "gbs": 32, "seq": 8192}),
    Case("Qwen1.5-MoE-A2.7B", 14.3, {"ep": 4, "dp": 8, "gbs": 64, "seq": 4096}, active=2.7),
    Case("deepseek-moe-16b-base", 16.4, {"ep": 8, "dp": 8, "gbs": 64, "seq": 4096}, active=2.8),
    Case("DeepSeek-V2-Lite", 15.7, {"ep": 8, "dp": 8, "gbs": 64, "seq": 4096}),
    Case(
        "Qwen3-235B-A22B",
        235.0,
        {"tp": 4, "pp": 8, "ep": 8, "dp": 8, "gbs": 256, "seq": 4096},
        active=22.0,
    ),
    Case(
        "dbrx-base",
        132.0,
        {"tp": 4, "pp": 4, "ep": 8, "dp": 8, "gbs": 128, "seq": 4096},
        active=36.0,
    ),
    Case(
        "Llama-4-Scout-17B-16E",
        109.0,
        {"tp": 2, "pp": 4, "ep": 8, "dp": 8, "gbs": 128, "seq": 8192},
        active=17.0,
        text_config=True,
    ),
]

#: config -> what the refusal names (the key or model type, and what it is)
REFUSED = {
    "bloom": "model_type 'bloom' means ALiBi attention biases",
    "Jamba-v0.1": "model_type 'jamba' means state-space \\(Mamba\\) layers",
    "mamba-2.8b-hf": "model_type 'mamba' means state-space \\(Mamba\\) layers",
    "Zamba2-2.7B": "model_type 'zamba2' means state-space \\(Mamba\\) layers",
    "rwkv-5-world-3b": "model_type 'rwkv5' means recurrent",
    "t5-base": "'is_encoder_decoder' means an encoder-decoder model",
}
