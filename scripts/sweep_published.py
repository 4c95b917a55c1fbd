"""Sweeps around published H100 runs: the best plan lumos finds, and where the published plan ranks.

For each run (rows of ../shared/validation/published_training_perf.csv) the job is fixed —
model, GPU count, global batch, sequence, precision — and lumos sweeps TP / PP / VP /
micro-batch / recompute around it. Printed per run: the published plan's estimate vs its
published tokens/s/GPU, the sweep's best plan, and the published plan's rank among the
plans that fit. Writes each sweep's table next to OUT (default: a temporary folder).

    python scripts/sweep_published.py [--out DIR] [--workers 2]
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from pathlib import Path

from lumos.simulator.sweep.runner import sweep
from lumos.simulator.sweep.space import SweepSpace, plan_key
from lumos.simulator.workload.plan import ParallelPlan, Precision, Recompute

CSV = Path(__file__).resolve().parents[2] / "shared" / "validation" / "published_training_perf.csv"

#: (row id, built-in model, grid) — grids centred on what practitioners try for the size
RUNS = (
    (
        "DGXC-Nemotron415B-BF16-64",
        "nemotron4-15b",
        {"tp": (1, 2, 4, 8), "pp": (1, 2, 4), "vp": (1,), "mbs": (1, 2, 4)},
    ),
    (
        "DGXC-GPT3175B-BF16-512",
        "gpt3-175b",
        {"tp": (4, 8), "pp": (4, 8, 16), "vp": (1, 6, 12), "mbs": (1, 2)},
    ),
    (
        "DGXC-GPT3175B-FP8-128",
        "gpt3-175b",
        {"tp": (4, 8), "pp": (4, 8), "vp": (1, 6, 12), "mbs": (1, 2)},
    ),
)


def _published(row_id: str) -> dict[str, str]:
    with CSV.open() as fh:
        for row in csv.DictReader(fh):
            if row["row_id"] == row_id:
                return row
    raise SystemExit(f"{row_id} not in {CSV}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="lumos-sweep-published-"))
    out.mkdir(parents=True, exist_ok=True)
    print(
        "| run | published plan | published tok/s/GPU | lumos, published plan | error | "
        "best plan found | best tok/s/GPU | published plan's rank (of fitting) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row_id, model, grid in RUNS:
        pub = _published(row_id)
        precision = "fp8" if pub["precision"].upper() == "FP8" else "bf16"
        gpus, gbs, seq = int(pub["gpus"]), int(pub["gbs_seqs"]), int(pub["seq_len"])
        vp = int(pub["vp"]) if pub["vp"].isdigit() else 1
        mine = ParallelPlan(
            tp=int(pub["tp"]),
            pp=int(pub["pp"]),
            dp=int(pub["dp"]),
            cp=int(pub["cp"] or 1),
            vp=vp,
            mbs=int(pub["mbs"]),
            gbs=gbs,
            seq=seq,
            precision=Precision(precision),
            recompute=Recompute.NONE,
        )
        space = SweepSpace(
            model=model,
            gpus=gpus,
            gbs=gbs,
            seq=seq,
            hw="h100",
            cp=(1,),
            recompute=("none", "selective"),
            precision=(precision,),
            tp=tuple(sorted({*grid["tp"], mine.tp})),
            pp=tuple(sorted({*grid["pp"], mine.pp})),
            vp=tuple(sorted({*grid["vp"], mine.vp})),
            mbs=tuple(sorted({*grid["mbs"], mine.mbs})),
        )
        result = sweep(space, out / f"{row_id}.csv", workers=args.workers)
        fitting = [r for r in result.rows if r.get("fits") and not r.get("error")]
        key = plan_key(mine)
        ours = next((r for r in result.rows if r["key"] == key), None)
        rank = next((i for i, r in enumerate(fitting, 1) if r["key"] == key), None)
        best = fitting[0] if fitting else None
        published = float(pub["tokens_per_s_per_gpu"])
        est = ours.get("tokens_per_s_per_gpu") if ours else None
        err = f"{(est - published) / published:+.1%}" if est else "n/a"
        print(
            f"| {row_id} | {key} | {published:.0f} | {est or float('nan'):.0f} | {err} | "
            f"{best['key'] if best else '-'} | {best['tokens_per_s_per_gpu'] if best else 0:.0f} | "
            f"{rank if rank else 'does not fit'} of {len(fitting)} |"
        )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
