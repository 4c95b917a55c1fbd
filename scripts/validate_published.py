"""Trace-free estimates vs published training runs (../shared/validation).

Every row of `published_training_perf.csv` that states a figure we can turn into a step
time and a configuration we can express is estimated with `lumos.simulator.workload.estimate`
and printed next to the published step time, with the error. Published step time:
`iter_time_s` when given, else derived with the source's own FLOP convention
(README of the validation folder): Narayanan 2021 TFLOP/s per GPU with
F = 96·B·s·l·h²(1 + s/6h + V/16lh); Korthikanti 2022 MFU with
F = 72·B·L·s·h²(1 + s/6h + V/12hL) against 312 TFLOP/s. Row → plan, from the row's own
columns: model shape, TP/PP/DP/CP, virtual stages, micro/global batch, sequence
parallelism, ZeRO / distributed optimizer, precision, recompute. What the sources say
about their software is used as stated, never tuned: Megatron-LM 2021/2022 ran unfused
attention and all-reduced gradients after the backward; NeMo 24.11 runs cuDNN flash
attention with gradient/parameter overlap, and TP-comm overlap where the row says so;
DeepSpeed's 2021 ZeRO-3 fetched each weight tensor alone, blocking, and reduced gradients
without overlap (`overlap_comm` off by default): `fsdp_unit="tensor"`, see
`simulator/workload/zero3_tensor.py`.
Unstated micro-batch sizes are 1. Nothing here is fitted.

    python scripts/validate_published.py [--csv PATH] [--only ROW_ID ...] [--markdown]
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lumos.errors import LumosError
from lumos.simulator.workload import ParallelPlan, Precision, Recompute, estimate
from lumos.simulator.workload.spec import Mlp, ModelSpec, Norm

CSV = Path(__file__).resolve().parents[2] / "shared" / "validation" / "published_training_perf.csv"


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
    B, s, h = int(r["gbs_seqs"]), int(r["seq_len"]), int(r["hidden"])
    layers, V = int(r["layers"]), int(r["vocab"] or 0)
    if r["iter_time_s"]:
        return float(r["iter_time_s"]), "iter_time_s"
    if r["tflops_per_gpu"] and r["source"].startswith("Narayanan"):
        f = 96 * B * s * layers * h * h * (1 + s / (6 * h) + V / (16 * layers * h))
        return f / (float(r["tflops_per_gpu"]) * 1e12 * gpus), "TFLOP/s (Narayanan Eq. 3)"
    if r["mfu_pct"] and r["source"].startswith("Korthikanti"):
        f = 72 * B * layers * s * h * h * (1 + s / (6 * h) + V / (12 * h * layers))
        return f / (float(r["mfu_pct"]) / 100 * 312e12 * gpus), "MFU (Korthikanti)"
    return None


def _model(r: dict[str, str]) -> ModelSpec:
    gpt = "GPT" in r["model"] and "Nemotron" not in r["model"]
    return ModelSpec(
        name=r["model"],
        layers=int(r["layers"]),
        hidden=int(r["hidden"]),
        heads=int(r["heads"]),
        kv_heads=int(r["kv_heads"] or r["heads"]),
        ffn=int(r["ffn"] or 4 * int(r["hidden"])),
        vocab=int(r["vocab"]),
        mlp=Mlp.GELU if gpt else Mlp.SQUARED_RELU,
        norm=Norm.LAYERNORM,
        tied_embeddings=gpt,
        position="learned" if gpt else "rope",
        bias=gpt,
        seq=int(r["seq_len"]),
    )


def _recompute(text: str) -> Recompute:
    t = text.lower()
    if t.startswith("selective"):
        return Recompute.SELECTIVE
    if t.startswith("full"):
        return Recompute.FULL
    return Recompute.NONE


def parse(r: dict[str, str]) -> Row | str:
    """A row we can estimate, or why not."""
    pub = _published(r)
    if pub is None:
        return "no published step time, TFLOP/s or MFU"
    if not r["layers"] or not r["vocab"]:
        return "model shape incomplete"
    nemo = r["framework"].startswith("NeMo")
    deepspeed = r["framework"].startswith("DeepSpeed")
    zero_text = r["zero_fsdp"].lower()
    zero = 3 if "zero-3" in zero_text else (1 if "distributed optimizer" in zero_text else 0)
    plan = ParallelPlan(
        tp=int(r["tp"]),
        pp=int(r["pp"]),
        dp=int(r["dp"]),
        cp=int(r["cp"] or 1),
        vp=_int(r["vp"], 1) or 1,
        mbs=_int(r["mbs"], 1) or 1,
        gbs=int(r["gbs_seqs"]),
        seq=int(r["seq_len"]),
        zero=zero,
        precision=Precision.FP8 if r["precision"].upper().startswith("FP8") else Precision.BF16,
        recompute=_recompute(r["recompute"]),
        sequence_parallel=r["sp"].lower().startswith("yes"),
        tp_comm_overlap="TP comm overlap" in r["framework"],
        overlap_grad_reduce=nemo or (zero == 3 and not deepspeed),
        overlap_param_gather=nemo or zero == 3,
        flash_attention=nemo,
        fsdp_unit="tensor" if deepspeed else "layer",
    )
    hw = "h100" if r["gpu_type"].startswith("H100") else "a100"
    return Row(r["row_id"], pub[0], pub[1], _model(r), plan, hw)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--csv", type=Path, default=CSV)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args()
    rows = list(csv.DictReader(args.csv.open()))
    errors: list[float] = []
    skipped: list[tuple[str, str]] = []
    if args.markdown:
        print(
            "| row | model | GPUs | plan | published s | predicted s | error | MFU | mem GB | basis |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if args.only and r["row_id"] not in args.only:
            continue
        row = parse(r)
        if isinstance(row, str):
            skipped.append((r["row_id"], row))
            continue
        t0 = time.perf_counter()
        try:
            est = estimate(row.model, row.plan, row.hw)
        except LumosError as exc:
            skipped.append((row.row_id, f"cannot express: {exc}"))
            continue
        err = est.iteration_time_s / row.published_s - 1
        errors.append(err)
        p = row.plan
        plan = (
            f"TP{p.tp} PP{p.pp}{f'v{p.vp}' if p.vp > 1 else ''} DP{p.dp} mbs{p.mbs} "
            f"{p.precision.value} {p.recompute.value}{' z3' if p.zero == 3 else ''}"
        )
        if args.markdown:
            print(
                f"| {row.row_id} | {r['model']} | {r['gpus']} | {plan} | {row.published_s:.2f} "
                f"| {est.iteration_time_s:.2f} | {100 * err:+.1f} % | {100 * est.mfu:.1f} % "
                f"| {est.memory.total_gb:.0f} | {row.basis} |"
            )
        else:
            print(
                f"{row.row_id:28s} {plan:36s} published {row.published_s:8.2f} s  "
                f"predicted {est.iteration_time_s:8.2f} s  {100 * err:+6.1f} %  "
                f"({time.perf_counter() - t0:.1f} s)",
                flush=True,
            )
    if errors:
        abs_err = [abs(e) for e in errors]
        print(
            f"\n{len(errors)} rows: mean |error| {100 * statistics.mean(abs_err):.1f} %, "
            f"median {100 * statistics.median(abs_err):.1f} %, max {100 * max(abs_err):.1f} %, "
            f"mean signed {100 * statistics.mean(errors):+.1f} %"
        )
    for rid, why in skipped:
        print(f"skipped {rid}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
