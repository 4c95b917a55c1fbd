"""The fourth held-out set (scripts/data/heldout4_h100.csv, `validate_published.py
--heldout4`): what a row's launch script or recipe sets that the shared columns cannot say
(used by `validate_published.py`; nothing here is fitted).

The file carries nine optional columns, each filled only where the row's script or recipe
states the setting (its `notes` / `locator` name where); an empty cell keeps the script's
convention (the fifth set, `heldout5_h100.csv`, carries the same columns, read the same way):

* `bias`, `dropout` ("yes" / "no"): the model's linear biases and dropout. FlagPerf's
  Megatron-Core 0.6.0 launch scripts (FlagOpen/FlagPerf `training/benchmarks/llama3_{8B,70B}/
  megatron/pretrain_llama3.sh`) pass neither `--disable-bias-linear` nor dropout flags, so
  Megatron-LM's defaults hold (`add_bias_linear` on, dropout 0.1); Megatron-LM's own
  examples set `--attention-dropout 0.0 --hidden-dropout 0.0` (dropout "no").
* `overlap_grad_reduce`, `overlap_param_gather`, `loss_fusion` ("yes" / "no"): Megatron-LM's
  `--overlap-grad-reduce`, `--overlap-param-gather` and `--cross-entropy-loss-fusion`, all off
  unless passed (FlagPerf passes none of them).
* `attention_kernel` ("fa2" / "cudnn"): the attention backend a row states (FlagPerf:
  `--use-flash-attn`, "flash attention 2").
* `embedding_in_split`, `loss_in_split` ("yes"), `defer_embedding_wgrad` (micro-batches):
  Megatron-Core's `account_for_{embedding,loss}_in_pipeline_split` and
  `defer_embedding_wgrad_compute` / `wgrad_deferral_limit` from the recipe a row names.

A LoRA fine-tuning row (the third and fifth sets) carries a `lora` column, "rank R; targets
T,...[; a2a]" (plan `lora_rank`, `lora_targets`, `lora_a2a`), from the recipe its `notes`
name; the third set carries `loss_fusion` too.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from lumos.simulator.workload import ParallelPlan
from lumos.simulator.workload.spec import ModelSpec

#: the set's file
CSV = Path(__file__).resolve().parent / "data" / "heldout4_h100.csv"
#: the yes / no columns, by the model or plan field each sets
MODEL_FLAGS = ("bias", "dropout")
PLAN_FLAGS = (
    "overlap_grad_reduce",
    "overlap_param_gather",
    "loss_fusion",
    "embedding_in_split",
    "loss_in_split",
)


def _said(r: dict[str, str], names: tuple[str, ...]) -> dict[str, bool]:
    return {n: r[n].lower().startswith("yes") for n in names if r.get(n)}


def software(
    r: dict[str, str], model: ModelSpec, plan: ParallelPlan
) -> tuple[ModelSpec, ParallelPlan]:
    """A row's model and plan with the settings its optional columns state (module doc);
    rows of the other files, which have none of the columns, come back as given."""
    fields: dict[str, Any] = _said(r, PLAN_FLAGS)
    if r.get("attention_kernel"):
        fields["attention_kernel"] = r["attention_kernel"]
    if r.get("defer_embedding_wgrad"):
        fields["defer_embedding_wgrad"] = int(r["defer_embedding_wgrad"])
    packed = re.search(r"packed_doc_len (\d+)", r.get("notes", ""))  # an assumed length
    if packed:
        fields["packed_doc_len"] = int(packed[1])
    return replace(model, **_said(r, MODEL_FLAGS)), replace(plan, **fields, **lora(r))


def lora(r: dict[str, str]) -> dict[str, Any]:
    """The plan's LoRA fields from a row's `lora` column ({} where it has none)."""
    m = re.fullmatch(r"rank (\d+); targets ([\w,]+)(; a2a)?", (r.get("lora") or "").strip())
    if not m:
        return {}
    return {"lora_rank": int(m[1]), "lora_targets": m[2], "lora_a2a": m[3] is not None}
