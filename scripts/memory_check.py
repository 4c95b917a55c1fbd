"""Published plans lumos says do not fit, and predicted vs measured memory per GPU.

Every published training run in the validation files ran, so its plan fitted its GPUs'
memory. This lists, over the six sets `validate_published.py` reads (default/shared,
`--heldout`, `--moe`, `--heldout2`, `--heldout3`, `--titan`), every estimated row whose
memory per GPU (`step.plan_memory`, the figure `lumos estimate` reports as
`memory_gb_per_gpu`) exceeds its GPU's capacity, with the reason where one is known
(`EXPLAINED`: a setting the run's recipe states that the row does not pass, or an
accounting lumos lacks), and, where a source publishes measured memory (`MEASURED`), the
predicted and measured figures side by side. Nothing here changes an estimate.

    python scripts/memory_check.py [--measured]
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from lumos.simulator.costmodel.kernels import KernelModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_published as vp

#: the six sets, by the flag that selects them
SETS = {
    "shared": vp.CSV,
    "heldout": vp.HELDOUT,
    "moe": vp.MOE,
    "heldout2": vp.HELDOUT2,
    "heldout3": vp.HELDOUT3,
    "titan": vp.TITAN,
}
#: why a published plan still shows as not fitting, by row-id pattern: the recipe setting
#: the row does not pass (passing it would move its step time) or the accounting lumos lacks
EXPLAINED: dict[str, str] = {
    r"^MB25(09|11)-Qwen3-30B-A3B": "1.5 GB (1.7 %) over since the QK-norm's saved query and "
    "key heads are counted (session 8: Megatron-Core's q_layernorm / k_layernorm are TE "
    "norms that keep their input); the same plan fitted with 0.1 GB to spare before: "
    "within the accounting's margin, the term not contradicted, nothing else found",
    r"^AM(2602)?-": "NeMo AutoModel: FSDP2 over all GPUs and activation_checkpointing: true in its "
    "configs, neither passed (the MoE path estimates Megatron with the distributed "
    "optimizer; reading the checkpointing moved M3 12.6 -> 25.9 %, docs/estimate.md)",
    r"^MZ-Qwen3-235B-iEP8-FSDP": "Megatron-FSDP (the row's name): parameters and gradients "
    "sharded, estimated as the distributed optimizer (optimizer states only)",
    r"Nemotron4?-340B": "unexplained, 2.4 GB (BF16) / 9 GB (FP8) over: checked, its gradients "
    "are BF16 (nemotron_340b.yaml grad_sync_dtype bf16; NeMo setup_mcore_distributed_parallel: "
    "grad_reduce_in_fp32 = grad_sync_dtype == 'fp32'); its optim `dtype: bf16` is read by "
    "Apex's distributed Adam only, not Megatron-Core's distributed optimizer (FP32 states); "
    "whether the FP8 run keeps FP8 parameters (fp8_params) was not found",
    r"^L3PAPER-405B": "Llama 3 paper: sequence parallelism not stated (estimated off); the paper "
    "cites Korthikanti et al. for its TP, whose SP would cut the activations ~2.8x (fits)",
    r"^NEMO2412-SFT-LLAMA2-70B": "16 GPUs, DP1: the distributed optimizer shards nothing "
    "(52 GB of FP32 states alone); VP, SP and the recipe's optimizer not stated",
    r"^DGXC-Paxml-GPT175B": "Paxml (JAX) SAVE_QKV_OUT_PROJ under XLA's buffer assignment, "
    "estimated with the Megatron accounting (keeps the attention output and the MLP input "
    "where the policy keeps the output projection's output)",
    r"^MAXTEXT-A3-L2-7B": "MaxText minimal_flash under XLA (JAX buffer assignment)",
    r"^MB2511-GPTOSS-120B": "recorded, not expressible (row's own column)",
}


@dataclass(frozen=True, slots=True)
class Measured:
    """A published peak memory per GPU (GiB) and where it is published."""

    gib: float
    source: str


_TT = "torchtitan docs/performance.md @ eaea6f6a (max reserved, max over GPUs)"
#: measured memory per GPU, by row id: torchtitan's published tables (Dec 2024 versions:
#: torch 1963fc8, torchao eab345c, torchtitan 9dec370; Grand Teton H100 96 GB)
MEASURED: dict[str, Measured] = {
    "TT-L31-8B-FSDP-8": Measured(82.4, _TT + " Table 1"),
    "TT2-L31-8B-FSDP-compile-8": Measured(77.0, _TT + " Table 1"),
    "TT2-L31-8B-FSDP-compile-float8-8": Measured(76.8, _TT + " Table 1"),
    "TT2-L31-8B-FSDP8-CP1-32K": Measured(83.9, _TT + " Table 2"),
    "TT2-L31-8B-FSDP4-CP2-64K": Measured(84.2, _TT + " Table 2"),
    "TT2-L31-8B-FSDP2-CP4-128K": Measured(84.0, _TT + " Table 2"),
    "TT2-L31-8B-FSDP1-CP8-256K": Measured(84.5, _TT + " Table 2"),
    "TT-L31-8B-FSDP-128": Measured(67.0, _TT + " Table 3"),
    "TT2-L31-8B-FSDP-compile-128": Measured(62.0, _TT + " Table 3"),
    "TT2-L31-8B-FSDP-compile-float8-128": Measured(61.8, _TT + " Table 3"),
    "TT-L31-70B-2D-256": Measured(71.9, _TT + " Table 4"),
    "TT-L31-70B-2DAsyncTP-256": Measured(67.6, _TT + " Table 4"),
    "TT-L31-405B-3D-1F1B-512": Measured(82.5, _TT + " Table 5"),
    "TT2-L31-405B-4D-FSDP8-CP1-32K": Measured(75.3, _TT + " Table 6"),
    "TT2-L31-405B-4D-FSDP4-CP2-64K": Measured(75.9, _TT + " Table 6"),
    "TT2-L31-405B-4D-FSDP2-CP4-128K": Measured(77.1, _TT + " Table 6"),
    "TT2-L31-405B-4D-FSDP1-CP8-256K": Measured(84.9, _TT + " Table 6"),
}


@dataclass(frozen=True, slots=True)
class RowMemory:
    """One estimated row's memory per GPU (GB, 1e9) against its GPU's capacity."""

    set_name: str
    row_id: str
    group: str
    plan: str
    hw: str
    total_gb: float
    capacity_gb: float
    activations_gb: float

    @property
    def fits(self) -> bool:
        return self.total_gb <= self.capacity_gb


@lru_cache(maxsize=16)
def _kernels(hw: str) -> KernelModel:
    from lumos.hwconfigs.load import load_system

    return KernelModel.for_gpu(load_system(hw).gpu)


def row_memory(set_name: str, r: dict[str, str]) -> RowMemory | None:
    """The memory of one published row's plan, or None where the row is not estimated."""
    from published_report import plan_text

    from lumos.simulator.workload.generate import Generator
    from lumos.simulator.workload.step import plan_memory

    row = vp.parse(r)
    if isinstance(row, str):
        return None
    m = plan_memory(Generator(row.model, row.plan, _kernels(row.hw)))
    return RowMemory(
        set_name,
        row.row_id,
        r["group"],
        plan_text(row.plan),
        row.hw,
        m.total_gb,
        m.capacity_gb,
        m.activations_gb,
    )


def all_rows(sets: tuple[str, ...] = tuple(SETS)) -> list[RowMemory]:
    """Every estimated row of `sets`, in file order."""
    out = []
    for name in sets:
        for r in csv.DictReader(SETS[name].open()):
            got = row_memory(name, r)
            if got is not None:
                out.append(got)
    return out


def reason(row_id: str) -> str:
    """Why a row is known not to fit as estimated (`EXPLAINED`), or ""."""
    return next((why for pat, why in EXPLAINED.items() if re.search(pat, row_id)), "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", nargs="*", default=list(SETS), choices=list(SETS))
    args = ap.parse_args()
    rows = all_rows(tuple(args.sets))
    over = [m for m in rows if not m.fits]
    print(f"{len(over)} of {len(rows)} estimated published plans flagged as not fitting")
    for m in over:
        why = reason(m.row_id) or "UNEXPLAINED"
        print(f"  {m.set_name:9s} {m.row_id:38s} {m.plan:44s} {m.total_gb:6.1f} GB")
        print(f"  {'':9s}   > {m.capacity_gb:.1f} GB: {why}")
    print("\npredicted vs measured (GB = 1e9; measured GiB converted)")
    for m in rows:
        if m.row_id in MEASURED:
            got = MEASURED[m.row_id].gib * 2**30 / 1e9
            err = (m.total_gb - got) / got * 100
            print(
                f"  {m.row_id:38s} predicted {m.total_gb:6.1f}  measured {got:6.1f}  {err:+6.1f} %"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
