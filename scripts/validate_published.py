"""Trace-free estimates vs published training runs (../shared/validation, scripts/data).

Every row of a published-runs CSV that states a figure we can turn into a step time and a
configuration we can express is estimated with `lumos.simulator.workload.estimate` and
printed next to the published step time, with the error. Two files: the shared rows
(`../shared/validation/published_training_perf.csv`, the default) and the held-out H100
rows (`scripts/data/heldout_h100.csv`, `--heldout`), the held-out mixture-of-experts rows
(`scripts/data/heldout_moe.csv`, `--moe`), the second and third held-out sets
(`scripts/data/heldout2_h100.csv`, `--heldout2`; `heldout3_h100.csv`, `--heldout3`) and the
held-out torchtitan rows (`scripts/data/heldout_titan_h100.csv`, `--titan`), the fourth set
(`heldout4_h100.csv`, `--heldout4`, `heldout4_rows.py`) and the fifth (`heldout5_h100.csv`,
`--heldout5`: MLPerf Training logs, read with the fourth set's launch-script columns) and the
hybrid Mamba-2 set (`hybrid_h100.csv`, `--hybrid`: Nemotron-H on DGX Cloud) and NeMo
AutoModel's LoRA runs on FSDP2 (`automodel_lora_h100.csv`, `--automodel-lora`) and the sixth
set (`heldout6_h100.csv`, `--heldout6`: MLPerf logs of other submitters and rounds) and the
seventh (`heldout7_h100.csv`, `--heldout7`: DGX Cloud NeMo fine-tuning, an MLPerf H200 control); see
`scripts/data/README.md`. A row's
`hwconfig` column, where it has one, names the shipped system it ran on (or a system YAML
in `scripts/data/`).

Published step time: `iter_time_s` when given, else derived — from tokens/s/GPU as
gbs·seq / (tokens/s/GPU · GPUs), or with the source's own FLOP convention: Narayanan 2021
TFLOP/s per GPU with F = 96·B·s·l·h²(1 + s/6h + V/16lh); Korthikanti 2022 MFU with
F = 72·B·L·s·h²(1 + s/6h + V/12hL) against 312 TFLOP/s. Row → plan, from the row's own
columns: model shape (and, where the file has them, `mlp`, `norm`, `position`,
`tied_embeddings`), TP/PP/DP/CP, virtual stages, micro/global batch, sequence
parallelism, ZeRO / distributed optimizer / FSDP, precision, recompute, and
`tp_comm_overlap` (else the framework column's "(TP comm overlap)"). What the sources say
about their software is used as stated, never tuned: Megatron-LM 2021/2022 ran unfused
attention and all-reduced gradients after the backward; NeMo, Megatron-Bridge and
torchtitan run fused (flash / cuDNN) attention with gradient/parameter overlap;
DeepSpeed's 2021 ZeRO-3 fetched each weight tensor alone, blocking, and reduced gradients
without overlap (`overlap_comm` off by default): `fsdp_unit="tensor"`, see
`simulator/workload/zero3_tensor.py`; torchtitan's FSDP under pipeline parallelism
is lumos' FSDP2-in-a-pipeline (`zero=3` with `pp`: gathered once a step, reduced after the
last backward; `simulator/workload/fsdp_pp.py`) on torchtitan's default layer split
(`pipesplit.torchtitan_split`), both from the framework profile. Unstated micro-batch sizes are 1; an unstated
TP-comm overlap is off; the recompute column is read by `recompute_rows.py` (JAX remat
policies the recipes set mapped onto lumos' modules; unstated: none). Mixture-of-experts rows (the `arch` column says MoE; their shape
columns are empty) take the built-in MoE model their name maps to (`_moe_model`: the
normalised name, or `MOE_MODELS`; shapes from each model's config.json,
`simulator/workload/models.yaml`), the row's EP, for Megatron-Bridge rows what its
performance recipes set (`MEGATRON_BRIDGE_MOE`, `recipe_settings.MOE_RECIPES`), and the
uneven pipeline split its config states (`PIPELINE_SPLITS`); a MoE model with no built-in is refused. A row whose `expressible`
column says "no", or whose model lumos refuses, is listed as skipped with the reason.
Nothing here is fitted.

    python scripts/validate_published.py [--heldout | --moe | --heldout2 | --heldout3 | --heldout4 | --heldout5 | --hybrid
        | --titan | --automodel-lora | --parallel | --heldout6 | --heldout7 | --csv PATH]
        [--only ROW_ID ...]
        [--markdown] [--json OUT] [--baseline EARLIER.json] [--unstated-recompute none|auto]
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lumos.errors import ConfigError
from lumos.simulator.workload import ParallelPlan, Precision, Recompute
from lumos.simulator.workload.pipesplit import parse_layout
from lumos.simulator.workload.spec import ModelSpec, builtin_models, load_model, model_from_dict

sys.path.insert(0, str(Path(__file__).resolve().parent))
import heldout4_rows
import recompute_rows
from recipe_settings import expert_gemms, model_settings, moe_recipe, own_profile, recipe_settings
from recompute_rows import JAX_REMAT, dense_recompute, stated_recompute, unstated  # noqa: F401

CSV = Path(__file__).resolve().parents[2] / "shared" / "validation" / "published_training_perf.csv"
HELDOUT = Path(__file__).resolve().parent / "data" / "heldout_h100.csv"
MOE = Path(__file__).resolve().parent / "data" / "heldout_moe.csv"
HELDOUT2 = Path(__file__).resolve().parent / "data" / "heldout2_h100.csv"
TITAN = Path(__file__).resolve().parent / "data" / "heldout_titan_h100.csv"
HELDOUT3 = Path(__file__).resolve().parent / "data" / "heldout3_h100.csv"
#: NeMo AutoModel's LoRA rows on PyTorch FSDP2 (`--automodel-lora`)
AUTOMODEL_LORA = Path(__file__).resolve().parent / "data" / "automodel_lora_h100.csv"
#: the held-out sets by the flag that selects them, in the order one wins over another
SETS = {"moe": MOE, "heldout2": HELDOUT2, "heldout3": HELDOUT3, "titan": TITAN, "heldout": HELDOUT}
SETS["automodel_lora"] = AUTOMODEL_LORA
HELDOUT4 = heldout4_rows.CSV  # the fourth held-out set (`--heldout4`, heldout4_rows.py)
#: the fifth held-out set (`--heldout5`): MLPerf Training logs, the fourth set's columns
HELDOUT5 = Path(__file__).resolve().parent / "data" / "heldout5_h100.csv"
#: the hybrid Mamba-2 set (`--hybrid`): Nemotron-H rows, the fifth set's columns, the model
#: the built-in their `model_spec` names (`_model`)
HYBRID = Path(__file__).resolve().parent / "data" / "hybrid_h100.csv"
SETS = {"hybrid": HYBRID, "heldout5": HELDOUT5, "heldout4": HELDOUT4} | SETS
#: parallel attention / MLP block runs (`--parallel`; the built-in `model_spec` names, as hybrid)
PARALLEL = Path(__file__).resolve().parent / "data" / "parallel_a100.csv"
SETS["parallel"] = PARALLEL
#: the sixth held-out set (`--heldout6`): MLPerf Training v4.0 / v4.1 / v6.0 logs of submitters
#: and rounds the fifth set does not hold, the fifth set's columns
HELDOUT6 = Path(__file__).resolve().parent / "data" / "heldout6_h100.csv"
SETS["heldout6"] = HELDOUT6
#: the seventh held-out set (`--heldout7`): DGX Cloud's NeMo 24.12 Llama 3 fine-tuning recipe
#: (SFT and LoRA, 8B and 70B) and an MLPerf v5.0 H200 LoRA control, the fifth set's columns
HELDOUT7 = Path(__file__).resolve().parent / "data" / "heldout7_h100.csv"
SETS["heldout7"] = HELDOUT7
#: frameworks whose runs predate fused attention and overlapped gradient reduction
LEGACY = ("Megatron-LM", "DeepSpeed")
#: the built-in model of a mixture-of-experts row's model name, where normalising the names
#: (`_moe_model`: lower case, no spaces, dashes or dots) does not find it
MOE_MODELS = {
    "Llama 4 Scout 17B-16E": "llama4-scout",
    "Llama 4 Maverick 17B-128E": "llama4-maverick",
    "Nemotron V3 Nano 30B": "nemotron-3-nano-30b",
}
#: what NVIDIA-NeMo/Megatron-Bridge's MoE performance recipes set where the published table
#: is silent: expert TP 1 (scripts/performance/configs/qwen/qwen3_workload_base_configs.py:
#: `expert_tensor_parallel_size=1` in every Qwen3 base config, gpt_oss_workload_base_configs.py
#: in GPT-OSS's), the distributed optimizer (the recipes' `use_distributed_optimizer`), no
#: recomputation (qwen3_llm_pretrain.py `set_qwen3_common_configs`: `recompute_granularity =
#: None`), and balanced routing (`moe_router_force_load_balancing = True`, "token-balanced"
#: in the table). Rows of other frameworks take Megatron-Core's default expert TP (= TP).
MEGATRON_BRIDGE_MOE = {"etp": 1, "zero": 1, "recompute": Recompute.NONE}
#: Megatron-Core `recompute_modules` of a Megatron-Bridge MoE recipe on H100: GPT-OSS 120B
#: re-computes its norms and expert activations (gpt_oss_workload_base_configs.py,
#: GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_V1 and _V2: `recompute_modules=["layernorm",
#: "moe_act"]`); the Qwen3 recipes re-compute nothing
MEGATRON_BRIDGE_RECOMPUTE = {"gpt-oss-120b": "layernorm,moe_act"}
#: Megatron-Bridge MoE recipes on H100 that overlap the EP all-to-alls (Megatron-Core's
#: `overlap_moe_expert_parallel_comm`, plan `a2a_overlap`): Qwen3 235B-A22B
#: (qwen3_workload_base_configs.py, QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_{BF16,FP8_CS}_V1 and
#: _V2: `moe_a2a_overlap=True`); Qwen3 30B-A3B's and GPT-OSS's H100 presets leave it off.
#: Releases before 25.11 (the 25.09 token-drop rows) are not known to set it.
MEGATRON_BRIDGE_A2A_OVERLAP = {"qwen3-235b-a22b"}
#: Megatron-MoE-ModelZoo's Qwen3-235B-A22B runs (best_practice/Qwen3/readme.md, qwen3/
#: run_h100_235b.sh) all load model_configs/benchmarking/Qwen3-235B-A22B.yaml, which sets
#: `--expert-tensor-parallel-size: 1` and `--use-distributed-optimizer`; the recompute
#: modules and the all-to-all overlap are the row's own (its `recompute` column, its notes)
MODELZOO_ETP = {"qwen3-235b-a22b": 1}
#: what a row's notes say when its EP all-to-alls overlap compute (`A2A_OVERLAP=1`, the
#: model zoo's "1F1B overlap" row)
A2A_OVERLAP_SAID = re.compile(r"a2a overlap on|all-to-all overlapped", re.I)
#: what a row says when its routing drops tokens and pads every expert to its capacity
#: (Megatron-Core `moe_pad_expert_input_to_capacity`, plan `moe_token_drop`): Megatron-Bridge
#: 25.09's token-drop rows (scripts/performance/configs/qwen3/qwen3_30b_a3b_llm_pretrain.py:
#: `use_tokendrop` default True -> `apply_moe_token_drop`, capacity factor 1.0, padded) and
#: the DGX Cloud Grok-1 recipe ("capacity factor 1.0 padded")
TOKEN_DROP_SAID = re.compile(r"token-?drop|capacity factor [\d.]+,? padded", re.I)
#: frameworks that train the Hugging Face model class, which has no multi-token-prediction
#: module: NeMo AutoModel's DeepseekV3ForCausalLM builds `num_hidden_layers` blocks and an
#: output head only (nemo_automodel/components/models/deepseek_v3/model.py). Megatron-Bridge's
#: DeepSeek-V3 recipe trains one MTP layer (recipes/deepseek/deepseek_v3.py:
#: `mtp_num_layers = 1`), as the built-in has it.
NO_MTP = ("NeMo AutoModel",)
#: frameworks whose routed experts run as one grouped kernel (plan `grouped_gemm="fused"`)
#: rather than Transformer Engine's per-expert cuBLASLt loop: NeMo AutoModel's
#: GroupedExpertsDeepEP runs grouped_gemm's CUTLASS `gmm` (default) or `torch._grouped_mm`
#: (nemo_automodel/components/moe/layers.py, its docstring: "Supports two GEMM backends")
FUSED_GROUPED_GEMM = ("NeMo AutoModel",)
#: frameworks whose MoE rows run PyTorch FSDP2 (`zero_fsdp` "FSDP2 ..."): NeMo AutoModel's
#: own MoE models on their Transformer Engine backend, its `moe.parallelizer.apply_fsdp`
#: (the `automodel` profile, `fsdp_moe`), where the row states its EP degree and runs TE
#: attention. The rest stay priced as Megatron-Core with the distributed optimizer: multi-
#: head latent attention (DeepSeek-V3, Kimi K2) and hybrid Mamba (Nemotron 3) are not
#: modelled under FSDP2 (the plan refuses them); GPT-OSS's table gives no EP ('-'; its
#: benchmark configs say ep_size 64 / 8, examples/benchmark/configs/gptoss_{120b,20b}_
#: te_deepep.yaml @ 037e04a, a later commit than the table's) and runs FlexAttention
#: (`attn: flex`), whose kernel rate lumos has no source for.
FSDP2_MOE = ("NeMo AutoModel",)
#: uneven pipeline splits the runs' own configs state, by (framework, built-in model), used
#: where the row is pipelined (and, for a layout, has its pp x vp chunks):
#: - Megatron-Bridge DeepSeek-V3 on H100 (PP 8 x VP 4): `layout="Et|(tt|)*30mL"` in
#:   scripts/performance/configs/deepseek/deepseek_llm_pretrain.py
#:   (`deepseek_v3_h100_1024gpus_{bf16,fp8}_config`; later releases' workload base configs
#:   keep `pp_layout="Et|(tt|)*30mL"` for DEEPSEEK_V3_PRETRAIN_CONFIG_H100_V1);
#: - Megatron-Bridge Qwen3 235B-A22B: the recipe the performance scripts build on
#:   (src/megatron/bridge/recipes/qwen/qwen3_moe.py `qwen3_235b_a22b_pretrain_config`) sets
#:   `account_for_embedding_in_pipeline_split` and `account_for_loss_in_pipeline_split`;
#: - Megatron-MoE-ModelZoo Qwen3-235B-A22B: model_configs/benchmarking/Qwen3-235B-A22B.yaml
#:   sets `--account-for-embedding-in-pipeline-split` and `--account-for-loss-in-pipeline-split`
#:   (the PP 32 x VP 3 row's 94 layers + 2 = 96 slots, one a virtual stage);
#: - Megatron-Bridge Llama 3.1 405B (dense): the recipe its performance scripts build on
#:   (src/megatron/bridge/recipes/llama/llama3.py `llama31_405b_pretrain_config`, used by
#:   scripts/performance/configs/llama/llama3_llm_pretrain.py `llama31_405b_pretrain_config_h100`)
#:   sets both accountings: 126 layers + 2 = 128 slots, PP 8 x VP 8, 2 a chunk (Megatron's
#:   even split could not place 126 layers on 8 stages at all);
#: - Meta's Llama 3 405B (arXiv:2407.21783 3.3.2): one layer fewer on the first and the last
#:   of its 16 stages (126 = 7 + 14 x 8 + 7).
#: Keys: (framework, the built-in model of a MoE row or the model column of a dense row).
PIPELINE_SPLITS: dict[tuple[str, str], dict[str, Any]] = {
    ("Megatron-Bridge", "deepseek-v3"): {"pp_layout": "Et|(tt|)*30mL"},
    ("Megatron-Bridge", "qwen3-235b-a22b"): {"embedding_in_split": True, "loss_in_split": True},
    ("Megatron-MoE-ModelZoo", "qwen3-235b-a22b"): {
        "embedding_in_split": True,
        "loss_in_split": True,
    },
    ("Megatron-Bridge", "Llama 3.1 405B"): {"embedding_in_split": True, "loss_in_split": True},
    ("Llama 3 paper", "Llama 3 405B"): {"first_stage_layers": 7, "last_stage_layers": 7},
}


@dataclass(frozen=True, slots=True)
class Row:
    row_id: str
    published_s: float
    basis: str
    model: ModelSpec
    plan: ParallelPlan
    hw: str


def _int(text: str, default: int | None = None) -> int | None:
    m = re.match(r"\s*(\d+)", text or "")
    return int(m.group(1)) if m else default


def _published(r: dict[str, str]) -> tuple[float, str] | None:
    gpus = int(r["gpus"])
    B, s = int(r["gbs_seqs"]), int(r["seq_len"])
    if r["iter_time_s"]:
        return float(r["iter_time_s"]), "iter_time_s"
    if r.get("tokens_per_s_per_gpu"):
        return B * s / (float(r["tokens_per_s_per_gpu"]) * gpus), "tokens/s/GPU"
    h, layers, V = int(r["hidden"]), int(r["layers"]), int(r["vocab"] or 0)
    narayanan = r.get("flops_counting", "").startswith("Narayanan Eq. 3")
    if r["tflops_per_gpu"] and (r["source"].startswith("Narayanan") or narayanan):
        f = 96 * B * s * layers * h * h * (1 + s / (6 * h) + V / (16 * layers * h))
        return f / (float(r["tflops_per_gpu"]) * 1e12 * gpus), "TFLOP/s (Narayanan Eq. 3)"
    if r["mfu_pct"] and r["source"].startswith("Korthikanti"):
        f = 72 * B * layers * s * h * h * (1 + s / (6 * h) + V / (12 * h * layers))
        return f / (float(r["mfu_pct"]) / 100 * 312e12 * gpus), "MFU (Korthikanti)"
    return None


def _model(r: dict[str, str]) -> ModelSpec:
    """The row's model; explicit architecture columns win over the name heuristic. A hybrid
    row's (or a parallel-block row's) is the built-in its `model_spec` names, at the row's
    sequence length."""
    if r.get("arch") in ("hybrid", "parallel"):
        return replace(load_model(r["model_spec"]), seq=int(r["seq_len"]))
    gpt = "GPT" in r["model"] and "Nemotron" not in r["model"]
    data: dict[str, object] = {
        "layers": int(r["layers"]),
        "hidden": int(r["hidden"]),
        "heads": int(r["heads"]),
        "kv_heads": int(r["kv_heads"] or r["heads"]),
        "ffn": int(r["ffn"] or 4 * int(r["hidden"])),
        "vocab": int(r["vocab"]),
        "mlp": r.get("mlp") or ("gelu" if gpt else "squared_relu"),
        "norm": r.get("norm") or "layernorm",
        "tied_embeddings": (r.get("tied_embeddings") or ("yes" if gpt else "no")) == "yes",
        "position": r.get("position") or ("learned" if gpt else "rope"),
        "seq": int(r["seq_len"]),
    }
    return model_from_dict(data | model_settings(r), f"row {r['row_id']}", r["model"])


def _moe_model(text: str) -> str | None:
    """The built-in MoE model a row names (`MOE_MODELS`, else by normalised name)."""
    if text in MOE_MODELS:
        return MOE_MODELS[text]

    def norm(name: str) -> str:
        return re.sub(r"[\s\-_.]", "", name.lower())

    found = [n for n in builtin_models() if norm(n) == norm(text) and load_model(n).moe]
    return found[0] if found else None


def parse_moe(r: dict[str, str]) -> Row | str:
    """A mixture-of-experts row (`_moe_model`, or the lumos YAML under scripts/data its
    `model_spec` names, with the row's layers; `MEGATRON_BRIDGE_MOE`), or why not."""
    spec = r.get("model_spec")
    name = str(HELDOUT2.parent / spec) if spec else _moe_model(r["model"])
    pub = _published(r) if r.get("tokens_per_s_per_gpu") or r["iter_time_s"] else None
    if name is None:
        return f"refused by lumos: no built-in shape for MoE model {r['model']!r}"
    if pub is None:
        return "no published step time or tokens/s"
    mb = dict(MEGATRON_BRIDGE_MOE)
    modules = ""
    zoo = "Megatron-MoE-ModelZoo" in r["framework"]
    if "Megatron-Bridge" not in r["framework"]:
        mb["etp"] = MODELZOO_ETP.get(name, 0) if zoo else 0
    elif name in MEGATRON_BRIDGE_RECOMPUTE:
        mb["recompute"], modules = Recompute.SELECTIVE, MEGATRON_BRIDGE_RECOMPUTE[name]
    recipe = moe_recipe(r, name)
    if recipe.get("recompute_modules"):
        mb["recompute"], modules = Recompute.SELECTIVE, recipe["recompute_modules"]
    if zoo or ("Megatron-Bridge" not in r["framework"] and unstated(r["recompute"])):
        stated = stated_recompute(r["recompute"])
        if isinstance(stated, str):
            return f"cannot express: {stated}"
        mb["recompute"], modules = stated
    release = re.search(r"Megatron-Bridge \((\d+)\.(\d+)\)", r["framework"])
    overlap = name in MEGATRON_BRIDGE_A2A_OVERLAP and release is not None
    overlap = overlap and (int(release[1]), int(release[2])) >= (25, 11)
    overlap = overlap or (zoo and A2A_OVERLAP_SAID.search(r.get("notes", "")) is not None)
    overlap = overlap or recipe.get("a2a_overlap", False)
    # what the row itself states: its dispatcher (DeepEP / HybridEP: Megatron-Core's "flex")
    # and its expert TP ("ETP 1" in the Megatron-MoE-ModelZoo notes)
    said = f"{r.get('notes', '')} {r['framework']}"
    flex = re.search(r"deepep|hybridep", said, re.I) is not None
    flex = (flex or recipe.get("dispatcher") == "flex") and int(r["ep"] or 1) > 1
    # token-drop rows (Megatron-Bridge 25.09's `apply_moe_token_drop`: capacity factor 1.0,
    # padded; the DGX Cloud Grok-1 recipe's "capacity factor 1.0 padded"): drop-and-pad
    drop = TOKEN_DROP_SAID.search(f"{r['row_id']} {r.get('notes', '')}") is not None
    etp = re.search(r"\bETP (\d+)", r.get("notes", ""))
    if etp:
        mb["etp"] = int(etp[1])
    try:
        model = load_model(name)
        model = replace(model, layers=int(r["layers"])) if spec else model
        if r["framework"].startswith(NO_MTP):
            model = replace(model, mtp_layers=0)
        fsdp2 = r["framework"].startswith(FSDP2_MOE) and r["zero_fsdp"].startswith("FSDP2")
        te_attention = "FlexAttention" not in r.get("notes", "")
        fsdp2 = fsdp2 and not model.mla and not model.pattern and te_attention and bool(r["ep"])
        plan = ParallelPlan.build(
            model,
            **_layout(r),
            **_pipeline_split(r, name),
            recompute=mb["recompute"],
            ep=int(r["ep"] or 1),
            etp=int(mb["etp"]),
            zero=3 if fsdp2 else int(mb["zero"]),
            framework="automodel" if fsdp2 else "megatron",
            recompute_modules=modules,
            a2a_overlap=overlap,
            dispatcher="flex" if flex else "alltoall",
            grouped_gemm=expert_gemms(r, FUSED_GROUPED_GEMM),
            moe_token_drop=drop,
            overlap_grad_reduce=recipe.get("overlap_grad_reduce", True),
            **recipe_settings(r),
        )
    except ConfigError as exc:
        return f"cannot express: {exc}"
    return Row(r["row_id"], pub[0], pub[1], model, plan, _system(r))


def _pipeline_split(r: dict[str, str], name: str) -> dict[str, Any]:
    """The uneven pipeline split a row's config states (`PIPELINE_SPLITS`), else none."""
    pp, vp = int(r["pp"]), _int(r["vp"], 1) or 1
    for (framework, model), split in PIPELINE_SPLITS.items():
        if framework not in r["framework"] or model != name or pp < 2:
            continue
        layout = split.get("pp_layout", "")
        if layout and len(parse_layout(layout)) != pp * vp:
            continue
        return dict(split)
    return {}


def parse(r: dict[str, str]) -> Row | str:
    """A row we can estimate, or why not."""
    if r.get("arch") == "MoE":
        return parse_moe(r)
    if (r.get("expressible") or "yes").lower().startswith("no"):
        return r["expressible"]
    pub = _published(r)
    if pub is None:
        return "no published step time, tokens/s, TFLOP/s or MFU"
    if not r["layers"] or not r["vocab"]:
        return "model shape incomplete"
    legacy = r["framework"].startswith(LEGACY)
    deepspeed = r["framework"].startswith("DeepSpeed")
    zero_text = r["zero_fsdp"].lower()
    zero = 3 if "zero-3" in zero_text else (1 if "distributed optimizer" in zero_text else 0)
    recompute, modules = dense_recompute(r["recompute"])
    plan = ParallelPlan(
        **_layout(r),
        **_pipeline_split(r, r["model"]),
        zero=zero,
        recompute=recompute,
        recompute_modules=modules,
        **recipe_settings(r),
        overlap_grad_reduce=not legacy or (zero == 3 and not deepspeed),
        overlap_param_gather=not legacy or zero == 3,
        flash_attention=not legacy,
        fsdp_unit="tensor" if deepspeed else "layer",
        framework=_framework(r),
    )
    try:
        model, plan = heldout4_rows.software(r, _model(r), plan)
        return Row(r["row_id"], pub[0], pub[1], model, plan, _system(r))
    except ConfigError as exc:
        return f"cannot express: {exc}"


def _layout(r: dict[str, str]) -> dict[str, Any]:
    """The plan fields every row states the same way: parallel degrees, batch, sequence,
    precision and sequence parallelism."""
    return {
        "tp": int(r["tp"]),
        "pp": int(r["pp"]),
        "dp": int(r["dp"]),
        "cp": int(r["cp"] or 1),
        "vp": _int(r["vp"], 1) or 1,
        "mbs": _int(r["mbs"], 1) or 1,
        "gbs": int(r["gbs_seqs"]),
        "seq": int(r["seq_len"]),
        "precision": Precision.FP8 if r["precision"].upper().startswith("FP8") else Precision.BF16,
        "sequence_parallel": r["sp"].lower().startswith("yes"),
    }


#: frameworks whose dense models run PyTorch-native FSDP2 with eager or compiled blocks:
#: torchtitan, and NeMo AutoModel (Hugging Face model classes under `fully_shard`, SDPA
#: attention on the BSHD path, `enable_compile` compiling each block), priced with
#: torchtitan's profiles
TORCH_NATIVE = ("torchtitan", "NeMo AutoModel")
#: frameworks that train a Hugging Face model class in eager PyTorch under the Trainer /
#: Accelerate (DeepSpeed ZeRO, FSDP1) on its flash-attn 2 path: the `hf-eager` profile
HUGGING_FACE = ("Hugging Face",)


def _framework(r: dict[str, str]) -> str:
    """The kernel profile of the row's software: llm-foundry, its own (`own_profile`), a
    Hugging Face model class in eager PyTorch (`HUGGING_FACE`), torchtitan eager or compiled
    (as its precision or notes say), else Megatron / TE's."""
    if r["framework"].startswith("llm-foundry"):
        return "llm-foundry"
    if own := own_profile(r):
        return own
    if r["framework"].startswith(HUGGING_FACE):
        return "hf-eager"
    if not r["framework"].startswith(TORCH_NATIVE):
        return "megatron"
    text = f"{r['precision']} {r.get('notes', '')}".replace("no torch.compile", "")
    if "torch.compile" in text:
        return "torchtitan-compile"
    # an eager Hugging Face model patched with Liger's Triton kernels (one kernel each for
    # RMSNorm, RoPE, SwiGLU; a fused linear cross-entropy): the compiled profile's fused
    # element-wise kernels with a fused loss, the switches of `olmo-core`
    return "olmo-core" if "Liger kernels" in text else "torchtitan"


def _system(r: dict[str, str]) -> str:
    """The system a row ran on: its `hwconfig` column (a shipped system, or a system YAML
    beside the data for a cluster no shipped one is), else the one its GPU names."""
    hw = r.get("hwconfig") or _hardware(r["gpu_type"])
    return str(HELDOUT2.parent / hw) if hw.endswith(".yaml") else hw


def _hardware(gpu_type: str) -> str:
    """The shipped system a row's GPU column names: torchtitan's Grand Teton H100 (96 GB
    HBM2e, 500 W) is its own config (`h100-96gb-500w`), other H100s the SXM5 80GB, an H200
    the HGX H200 (`h200`)."""
    if gpu_type.startswith("H100") and "HBM2e" in gpu_type and "500 W" in gpu_type:
        return "h100-96gb-500w"
    if gpu_type.startswith("H200"):
        return "h200"
    return "h100" if gpu_type.startswith("H100") else "a100"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--csv", type=Path, default=None)
    for name, held in SETS.items():
        flag = f"--{name.replace('_', '-')}"
        ap.add_argument(flag, dest=name, action="store_true", help=f"use {held.name}")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--json", type=Path, default=None, help="write per-row results here")
    ap.add_argument("--baseline", type=Path, default=None, help="an earlier --json: adds its error")
    ap.add_argument(
        "--unstated-recompute",
        choices=("none", "auto"),
        default="none",
        help="what a row that states no recompute runs (recompute_rows.py)",
    )
    args = ap.parse_args()
    recompute_rows.UNSTATED = Recompute(args.unstated_recompute)
    path = args.csv or next((f for name, f in SETS.items() if getattr(args, name)), CSV)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from published_report import report

    report(list(csv.DictReader(path.open())), parse, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
