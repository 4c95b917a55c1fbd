"""What a published row's recipe sets for its software, beyond its own columns, by the
row's locator (used by `validate_published.py`; split out of it to keep that module
small). Each table names the recipe file it was read from; nothing here is fitted."""

from __future__ import annotations

import re
from typing import Any

#: the userbuffers config a recipe states itself (plan `ub_config`, `userbuffers.RECIPES`),
#: by the row's locator: the DGX Cloud GPT-3 175B recipe's `ub_tp_comm_overlap_cfg`
#: (NVIDIA/dgxc-benchmarking nemo_megatron/gpt3_175b_hydra.yaml); other rows take the
#: config NeMo ships for their (hidden, TP)
UB_CONFIG_BY_LOCATOR = {"nemo_megatron/README_175b.md": "dgxc-gpt3-175b"}
#: TP-comm overlap read from the recipe config a shared row's locator names, where the
#: row's framework string is silent: the DGX Cloud Nemotron-4 15B recipe runs with
#: `ub_tp_comm_overlap: True` (NVIDIA/dgxc-benchmarking nemotron/nemotron4-15b-synth.yaml)
TP_OVERLAP_BY_LOCATOR = {"nemotron/README_15b.md": True}
#: rows whose recipe leaves Megatron-Core's `cross_entropy_loss_fusion` at its default, off
#: (`model_parallel_config.py`; plan `loss_fusion=False`), by locator: the DGX Cloud GPT-3 175B recipe
#: (dgxc-benchmarking nemo_megatron/gpt3_175b_hydra.yaml, no such key; its Nemotron-4
#: recipes set it true) and the NeMo 24.07 table rows whose NeMo-Framework-Launcher recipe
#: has no such key (conf/training/gpt3/5b_fp8_performance.yaml, 20b_fp8_performance.yaml,
#: 175b_fp8_performance.yaml, nemotron/nemotron_8b.yaml, nemotron_22b.yaml,
#: llama/llama3_8b.yaml; llama2_7b, llama3_70b, llama3_1_* and nemotron_340b set it true;
#: llama2_13b / 70b were not checked and keep the fused default); the DGX Cloud Grok-1
#: recipe (dgxc-benchmarking grok1/grok1_314b.yaml @ 35a9aecc: no such key, nor in
#: grok1/configure.sh @ 143b90dd's overrides)
UNFUSED_LOSS = re.compile(
    r"^nemo_megatron/README_175b\.md|performance_summary\.md.*row "
    r"'(GPT3-5B|GPT3-20B|GPT3-175B|Nemotron-8B|Nemotron-22B|LLAMA3-8B)'"
    r"|dgxc-benchmarking grok1/README_314b\.md"
)
#: rows whose recipe defers the output layer's weight gradients to the pipeline flush
#: (Megatron-Core `defer_embedding_wgrad_compute`, `wgrad_deferral_limit`; plan
#: `defer_embedding_wgrad`), by locator, applied where the row is pipelined:
#: NeMo-Framework-Launcher conf/training/llama/llama3_1_70b.yaml and llama3_70b.yaml (22),
#: llama3_1_405b.yaml (50), nemotron/nemotron_340b.yaml (22) — the DGX Cloud 24.09 / 24.11
#: recipes and the NeMo 24.07 table rows that load them
DEFERRED_WGRAD = (
    (re.compile(r"^llama3\.1/README_70b\.md|performance_summary\.md.*row 'LLAMA3-70B'"), 22),
    (re.compile(r"^llama3\.1/README_405b\.md"), 50),
    (re.compile(r"^nemotron/README_340b\.md|performance_summary\.md.*row 'Nemotron-340B'"), 22),
)

#: rows whose recipe runs its experts as Megatron-Core's `SequentialMLP` (`moe_grouped_gemm:
#: false`; plan `grouped_gemm="sequential"`), by locator: the DGX Cloud Grok-1 recipe
#: (dgxc-benchmarking grok1/grok1_314b.yaml @ 35a9aecc `moe_grouped_gemm: false`, run in NeMo
#: 24.09 / Megatron-Core 0.9: grok1/launch.sh @ 143b90dd `FW_VERSION=24.09`)
SEQUENTIAL_EXPERTS = re.compile(r"dgxc-benchmarking grok1/README_314b\.md")


#: what Megatron-Bridge's MoE performance recipes on H100 set for a built-in model beyond the
#: published table, by model (plan fields; `moe_recipe`): DeepSeek-V3 on 1,024 H100s —
#: scripts/performance/configs/deepseek/deepseek_llm_pretrain.py
#: `deepseek_v3_h100_1024gpus_{bf16,fp8}_config` (and the older deepseek_v3_llm_pretrain.py
#: `deepseek_v3_h100_bf16_config`, dropless defaults `enable_deepep=True, a2a_1f1b=True`):
#: `pretrain_config(enable_deepep=True, layout="Et|(tt|)*30mL")` (Megatron-Core's flex
#: dispatcher with DeepEP), `set_moe_a2a_overlap_overrides(cfg)` / `moe_a2a_1f1b_overrides`
#: (`overlap_moe_expert_parallel_comm`), `recompute_modules = ["mla_up_proj", "mlp"]` (with
#: `recompute_granularity = "selective"`) and `comm_overlap.overlap_grad_reduce = False`
#: ("Disabling to avoid functional errors"), in every version of the file read, 25.09's
#: dropless run included
MOE_RECIPES: dict[str, dict[str, Any]] = {
    "deepseek-v3": {
        "dispatcher": "flex",
        "a2a_overlap": True,
        "recompute_modules": "mla_up_proj,mlp",
        "overlap_grad_reduce": False,
    },
}


def moe_recipe(r: dict[str, str], name: str) -> dict[str, Any]:
    """The plan fields a Megatron-Bridge MoE row's performance recipe sets for its built-in
    model `name` (`MOE_RECIPES`); none for other frameworks' rows."""
    if "Megatron-Bridge" not in r["framework"]:
        return {}
    return dict(MOE_RECIPES.get(name, {}))


def expert_gemms(r: dict[str, str], fused: tuple[str, ...]) -> str:
    """How a MoE row's experts run (plan `grouped_gemm`): one grouped kernel where its
    framework is one of `fused`, Megatron-Core's SequentialMLP where its recipe says so
    (`SEQUENTIAL_EXPERTS`), else Transformer Engine's per-expert loop."""
    if r["framework"].startswith(fused):
        return "fused"
    return "sequential" if SEQUENTIAL_EXPERTS.search(r["locator"]) else "te"


def _tp_overlap(r: dict[str, str]) -> bool:
    stated = (r.get("tp_comm_overlap") or "").lower()
    if stated.startswith(("yes", "no")):
        return stated.startswith("yes")
    for prefix, on in TP_OVERLAP_BY_LOCATOR.items():
        if r["locator"].startswith(prefix):
            return on
    return "TP comm overlap" in r["framework"]


def _deferred_wgrad(r: dict[str, str]) -> int:
    """Micro-batches whose output-layer weight gradient the row's recipe defers to the
    pipeline flush (`DEFERRED_WGRAD`); 0 unpipelined, where there is no flush to fill."""
    if int(r["pp"]) < 2:
        return 0
    return next((n for pat, n in DEFERRED_WGRAD if pat.search(r["locator"])), 0)


#: Transformer Engine's attention backend where a row's recipe disables cuDNN fused attention
#: (`NVTE_FUSED_ATTN=0` in its notes, e.g. dgxc-benchmarking grok1/configure.sh @ 143b90dd):
#: TE then selects flash-attn (TE's `get_attention_backend`, "Disabling FusedAttention due to
#: NVTE_FUSED_ATTN=0 ... Selected backend = FlashAttention (2.x)"); FlashAttention-3 was not
#: in NVIDIA's containers then (bionemo-recipes#735, 2025-03: install it by hand), so FA2
FUSED_ATTN_OFF = re.compile(r"NVTE_FUSED_ATTN=0")


#: frameworks with a kernel profile of their own read from their code, by the row's framework
#: column (`simulator/workload/framework.py`): OLMo-core's trainer (allenai/OLMo-core,
#: late-2024 `Transformer.apply_fsdp` / `apply_compile`: FSDP2 per block, param BF16 /
#: reduce FP32, `torch.compile` per block, SDPA, torchao float8; the official scripts'
#: `fused_loss=True`) runs torchtitan-compile's kernels with a fused loss: `olmo-core`
PROFILE_BY_FRAMEWORK = {"OLMo-core": "olmo-core"}


#: models whose configs train without dropout, by the row's model name: MosaicML's MPT
#: (llm-foundry llmfoundry/models/mpt/configuration_mpt.py: `resid_pdrop=0.0`,
#: `emb_pdrop=0.0`, `attn_config` `attn_pdrop: 0.0`; scripts/train/yamls/pretrain/mpt-*.yaml
#: set none of them), whose `nn.Dropout(0.0)` returns its input and keeps no mask
NO_DROPOUT = ("MPT",)


def model_settings(r: dict[str, str]) -> dict[str, bool]:
    """What a dense row's model trains with beyond its shape columns: biases (GPT and MPT
    rows) and, for those, dropout unless its config has none (`NO_DROPOUT`)."""
    name = r["model"]
    gpt = "GPT" in name and "Nemotron" not in name
    return {"bias": gpt or name.startswith("MPT"), "dropout": not name.startswith(NO_DROPOUT)}


def own_profile(r: dict[str, str]) -> str:
    """The kernel profile of a framework `PROFILE_BY_FRAMEWORK` names; "" for others."""
    return next((p for f, p in PROFILE_BY_FRAMEWORK.items() if r["framework"].startswith(f)), "")


#: a row whose launch script or config states FP8 parameters (MLPerf NVIDIA's
#: `FP8_PARAMS=True`, Megatron-LM's `--fp8-param-gather`; plan `fp8_param_gather`)
FP8_PARAMS = re.compile(r"FP8_PARAMS=True|--fp8-param-gather")


#: frameworks priced with the `megatron` kernel profile that build the vocabulary unpadded
#: (plan `vocab_multiple` 1): MaxText and Paxml (JAX: `Embed(num_embeddings=vocab_size)`,
#: sharded by GSPMD as it is), Hugging Face accelerate + PEFT (`nn.Embedding(vocab_size)`),
#: Meta's internal Llama 3 stack (nothing published says it pads). Megatron-LM, NeMo,
#: Megatron-Bridge, FlagScale / FlagPerf (Megatron-LM's `pretrain_gpt.py`) and DeepSpeed's
#: Megatron GPT pad to 128 x TP (`dims.padded_vocab`)
UNPADDED_VOCAB = ("MaxText", "Paxml", "Hugging Face", "Meta internal")


def recipe_settings(r: dict[str, str]) -> dict[str, Any]:
    """The plan fields a row's recipe sets: its TP-comm overlap and userbuffers config,
    its cross-entropy fusion, its deferred output-layer weight gradients, its attention
    kernel, FP8 parameters and vocabulary padding (`UNPADDED_VOCAB`)."""
    ub = next((n for p, n in UB_CONFIG_BY_LOCATOR.items() if r["locator"].startswith(p)), "")
    return {
        "tp_comm_overlap": _tp_overlap(r),
        "ub_config": ub,
        "loss_fusion": UNFUSED_LOSS.search(r["locator"]) is None,
        "defer_embedding_wgrad": _deferred_wgrad(r),
        "attention_kernel": "fa2" if FUSED_ATTN_OFF.search(r.get("notes", "")) else "",
        "fp8_param_gather": FP8_PARAMS.search(f"{r.get('precision', '')} {r.get('notes', '')}")
        is not None,
        "vocab_multiple": 1 if r["framework"].startswith(UNPADDED_VOCAB) else 0,
    }
