"""Transformer Engine userbuffers settings of the TP-comm overlap, as NeMo's recipes ship them.

With `tp_comm_overlap`, Transformer Engine overlaps each sequence-parallel collective
with the GEMM next to it, per GEMM as its userbuffers config says: the SMs the
communication kernel holds (`num_sm`; the GEMM runs on the rest), the chunks of a
"pipeline" reduce-scatter (`num_splits`), whether a "ring_exchange" all-gather runs its
GEMM on two shards a step (`aggregate`: TP / 2 GEMMs instead of TP), and whether a
reduce-scatter moves the GEMM's FP8 output (`fp8_buf`: 1 byte an element instead of 2).
NeMo tunes one config per GEMM shape and names it by hidden size and TP
(`ub_cfg_h100_h<hidden>_tp<tp>_...`); lumos takes the one shipped for the plan's
(hidden, TP) and, for any other shape, the Llama 3 70B one (what lumos used for every
plan before). Sources, NeMo-Framework-Launcher `launcher_scripts/conf/training/tp_overlap/`:

* `ub_cfg_h100_h8192_tp4_mbs1_seqlen8192.yaml` and its `_fp8_` twin (Llama 3 70B; the
  default): bulk QKV 4 / 24 and FC1 2 / 4 SMs, pipeline proj 24 and FC2 16 SMs in 4
  splits; the FP8 file sets `fp8_buf` on both;
* `ub_cfg_h100_{bf16,fp8}_h16384_tp8_cp2_mbs1_seqlen8192.yaml` (Llama 3.1 405B): bulk
  QKV 2 / 24 and FC1 2 / 2, pipeline proj 24 and FC2 8 (BF16) / 16 (FP8) SMs;
  `aggregate` on the QKV and FC1 forward and proj backward ring exchanges (and FC2's
  backward under BF16); FP8: `fp8_buf` on both reduce-scatters;
* `ub_cfg_h100_h12288_tp4_mbs2_seqlen2048.yaml` (GPT-3 175B; NeMo's
  `userbuffers_*_h100_h12288_tp4_mbs1_seqlen2048` has the same values): bulk QKV 4 / 4
  and FC1 2 / 4, pipeline proj 24 SMs (`fp8_buf`), FC2's reduce-scatter a ring exchange
  on 1 SM (TP chunks);
* `ub_cfg_h100_h6144_tp2_mbs2_seqlen2048.yaml` (GPT-3 20B): bulk QKV 8 / 16 and FC1
  4 / 16, pipeline proj 16 and FC2 24 SMs (NeMo's FP8 twin sets `fp8_buf`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class UbConfig:
    """One userbuffers config. `reduce`: the row-parallel forward GEMM (proj, fc2) → (SMs
    its reduce-scatter holds, GEMM chunks; 0 chunks: one per TP rank, a ring exchange);
    `bulk`: the column-parallel GEMM (qkv, fc1) → (SMs the all-gather holds under dgrad,
    SMs the reduce-scatter holds under wgrad); `aggregate`: the ring-exchange all-gather
    GEMMs ("qkv.fprop", "fc1.fprop", "proj.dgrad", "fc2.dgrad") that take two shards a
    step; `fp8_buf`: the reduce-scatters that move FP8 under FP8 training."""

    reduce: dict[str, tuple[int, int]]
    bulk: dict[str, tuple[int, int]]
    aggregate: frozenset[str] = frozenset()
    fp8_buf: frozenset[str] = frozenset()


LLAMA3_70B = UbConfig(
    reduce={"proj": (24, 4), "fc2": (16, 4)},
    bulk={"qkv": (4, 24), "fc1": (2, 4)},
    fp8_buf=frozenset({"proj", "fc2"}),
)
#: Transformer Engine's own defaults, what a recipe that enables the overlap without a
#: config runs (`initialize_ub` `get_default_config`: `num_sm` 16 for the bulk and pipeline
#: methods, 4 splits, `fp8_buf` only on the all-gathers)
TE_DEFAULT = UbConfig(
    reduce={"proj": (16, 4), "fc2": (16, 4)},
    bulk={"qkv": (16, 16), "fc1": (16, 16)},
)
_405B_BULK = {"qkv": (2, 24), "fc1": (2, 2)}
_RING = frozenset({"qkv.fprop", "fc1.fprop", "proj.dgrad"})
#: (hidden, TP, FP8) → the config NeMo ships for that GEMM shape on H100 (module doc)
NEMO_H100: dict[tuple[int, int, bool], UbConfig] = {
    (8192, 4, False): replace(LLAMA3_70B, fp8_buf=frozenset()),
    (8192, 4, True): LLAMA3_70B,
    (16384, 8, False): UbConfig(
        reduce={"proj": (24, 4), "fc2": (8, 4)},
        bulk=_405B_BULK,
        aggregate=_RING | {"fc2.dgrad"},
    ),
    (16384, 8, True): UbConfig(
        reduce={"proj": (24, 4), "fc2": (16, 4)},
        bulk=_405B_BULK,
        aggregate=_RING,
        fp8_buf=frozenset({"proj", "fc2"}),
    ),
    **{
        (12288, 4, fp8): UbConfig(
            reduce={"proj": (24, 4), "fc2": (1, 0)},
            bulk={"qkv": (4, 4), "fc1": (2, 4)},
            fp8_buf=frozenset({"proj"}),
        )
        for fp8 in (False, True)
    },
    **{
        (6144, 2, fp8): UbConfig(
            reduce={"proj": (16, 4), "fc2": (24, 4)},
            bulk={"qkv": (8, 16), "fc1": (4, 16)},
            fp8_buf=frozenset({"proj", "fc2"}),
        )
        for fp8 in (False, True)
    },
}


#: configs a recipe states itself rather than by shape (a plan's `ub_config` names one):
#: the DGX Cloud 24.11 GPT-3 175B recipe (NVIDIA/dgxc-benchmarking
#: `nemo_megatron/gpt3_175b_hydra.yaml`, `ub_tp_comm_overlap_cfg`): bulk QKV 4 / 8 and FC1
#: 2 / 4, pipeline proj 24 and FC2 20 SMs in 4 splits, FC2's backward ring exchange
#: aggregated, no `fp8_buf`
RECIPES: dict[str, UbConfig] = {
    "dgxc-gpt3-175b": UbConfig(
        reduce={"proj": (24, 4), "fc2": (20, 4)},
        bulk={"qkv": (4, 8), "fc1": (2, 4)},
        aggregate=frozenset({"fc2.dgrad"}),
    ),
}


def ub_config(hidden: int, tp: int, fp8: bool, name: str = "") -> UbConfig:
    """The userbuffers config a recipe names (`RECIPES`), else the one NeMo ships for the
    plan's GEMM shape (`NEMO_H100`), else Transformer Engine's defaults (`TE_DEFAULT`)."""
    if name:
        return RECIPES[name]
    return NEMO_H100.get((hidden, tp, fp8), TE_DEFAULT)


#: GEMMs that run on another GEMM's userbuffers (Megatron-Core's `tp_comm_buffer_name`): the
#: Mamba mixer's in_proj on the MLP's "fc1" buffers, its out_proj on "fc2"
#: (megatron/core/ssm/mamba_mixer.py, `MambaMixer.__init__`)
BUFFER_OF = {"in_proj": "fc1", "out_proj": "fc2"}


def ub_kind(name: str) -> str:
    """The userbuffers a GEMM node uses: "<layer>.fc2" → "fc2", "<layer>.out_proj" → "fc2"."""
    kind = name.rsplit(".", 1)[-1]
    return BUFFER_OF.get(kind, kind)


def gemm_key(name: str) -> str:
    """A ring-exchange GEMM's name in the configs: "<layer>.qkv" → "qkv.fprop",
    "<layer>.proj.dgrad" → "proj.dgrad"."""
    parts = name.split(".")
    if parts[-1] == "dgrad" and len(parts) > 1:
        return f"{ub_kind('.'.join(parts[:-1]))}.dgrad"
    return f"{ub_kind(name)}.fprop"
