"""The GPU swap on real GPU traces: step time and per-kernel-class ratios, V100/A100/H100.

Converts the PARAM DLRM trace (8 x V100), an HTA trace (A100) and the TraceLens BERT
trace (H100) from ../shared/fixtures (or $LUMOS_FIXTURES), swaps each to the other two
GPUs with `lumos whatif --hw` semantics (`lumos.simulator.whatif.hardware.swap_gpu`:
kernels re-timed per class by the cost model's ratio, communication by the network
models') and prints the table of docs/whatif.md.

    python scripts/whatif_hw.py --out out/whatif_hw
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from lumos.converters.pytorch.convert import convert
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.roofline import CostModel
from lumos.simulator.network.nccl import pricer_for_job
from lumos.simulator.result import SimResult
from lumos.simulator.whatif.etset import load_etset, simulate_etset
from lumos.simulator.whatif.hardware import ClassRatios, swap_gpu

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("LUMOS_FIXTURES", ROOT.parent / "shared" / "fixtures"))
DLRM = "param/et_replay/tests/inputs"
CASES = {
    "dlrm_8xV100": (("dlrm_pytorch_et.tar.gz", "dlrm_kineto.tar.gz"), DLRM, "v100"),
    "hta_alexnet_A100": (("alexnet",), "HolisticTraceAnalysis/tests/data/critical_path", "a100"),
    "tracelens_bert_H100": (
        ("gaunernst_bert-small-uncased__1016001.json.gz",),
        "TraceLens/tests/traces/h100",
        "h100",
    ),
}
SYSTEMS = ("v100", "a100", "h100")


def _slowest(result: SimResult) -> tuple[float, float]:
    """(CPU-window step, GPU-inclusive step) of the slowest rank, in ms: a GPU swap moves
    the second; the first only where the CPU waits for the GPU inside the step."""
    return (
        max(r.iteration_time_ns for r in result.ranks) / 1e6,
        max(r.gpu_inclusive_ns for r in result.ranks) / 1e6,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "out" / "whatif_hw")
    args = p.parse_args()
    print(
        "| trace | traced on | -> | CPU-window step ms | GPU-inclusive step ms "
        "| GPU kernel time x | per class (kernels) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, (files, folder, traced) in CASES.items():
        out = args.out / name
        if not any(out.glob("*.et")):
            convert([FIXTURES / folder / f for f in files], out, prefix=name)
        ets = load_etset(out)
        base = _slowest(simulate_etset(ets))
        old = load_system(traced)
        for target in SYSTEMS:
            new = load_system(target)
            summary = ClassRatios()
            edited = swap_gpu(
                ets,
                CostModel.for_gpu(old.gpu),
                CostModel.for_gpu(new.gpu),
                pricer_for_job(traced, ets.world_size),
                pricer_for_job(target, ets.world_size),
                summary,
            )
            step = _slowest(simulate_etset(edited))
            total = sum(summary.new_ns.values()) / max(1, sum(summary.old_ns.values()))
            classes = ", ".join(
                f"{k} x{summary.new_ns[k] / summary.old_ns[k]:.2f} ({summary.kernels[k]})"
                for k in sorted(summary.kernels)
                if summary.old_ns[k]
            )
            print(
                f"| {name} | {old.gpu.name} | {new.gpu.name} | {base[0]:.2f} -> {step[0]:.2f} "
                f"| {base[1]:.2f} -> {step[1]:.2f} | x{total:.2f} | {classes} |"
            )


if __name__ == "__main__":
    main()
