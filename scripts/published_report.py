"""The per-row table and per-group summary of `validate_published.py` (split out of it to
keep that module small): every parsed row is estimated with
`lumos.simulator.workload.estimate` and printed next to its published step time; rows that
do not parse, or that lumos refuses, are listed as skipped with the reason. Nothing here
is fitted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from lumos.errors import LumosError
from lumos.simulator.workload import ParallelPlan, estimate


def plan_text(p: ParallelPlan) -> str:
    """A plan in one short line: degrees, micro-batch, precision, recompute, options."""
    return (
        f"TP{p.tp} PP{p.pp}{f'v{p.vp}' if p.vp > 1 else ''} DP{p.dp}"
        f"{f' CP{p.cp}' if p.cp > 1 else ''}{f' EP{p.ep}' if p.ep > 1 else ''} mbs{p.mbs} {p.precision.value} {p.recompute.value}"
        f"{f'({p.recompute_modules})' if p.recompute_modules else ''}"
        f"{' a2a-overlap' if p.a2a_overlap else ''}{' flex' if p.dispatcher == 'flex' else ''}"
        f"{' z3' if p.zero == 3 else ''}{' tpo' if p.tp_comm_overlap else ''}"
        f"{' E+L-split' if p.embedding_in_split and p.loss_in_split else ''}"
        f"{' layout' if p.pp_layout else ''}"
        f"{f' split{p.first_stage_layers}/{p.last_stage_layers}' if p.first_stage_layers else ''}"
        f"{'' if p.framework == 'megatron' else ' ' + p.framework}"
    )


def summary(label: str, errors: list[float]) -> str:
    """Mean / median / max |error| and mean signed error of a list of relative errors."""
    a = [abs(e) for e in errors]
    return (
        f"{label}: {len(errors)} rows, mean |error| {100 * statistics.mean(a):.1f} %, "
        f"median {100 * statistics.median(a):.1f} %, max {100 * max(a):.1f} %, "
        f"mean signed {100 * statistics.mean(errors):+.1f} %"
    )


def report(
    rows: list[dict[str, str]], parse: Callable[[dict[str, str]], Any], args: argparse.Namespace
) -> None:
    """Estimate every row `parse` accepts and print the table (`args.markdown`), the
    summaries and the skipped rows; `args.only`, `args.json`, `args.baseline` as in
    `validate_published.py`."""
    before = json.loads(args.baseline.read_text()) if args.baseline else {}
    errors: list[float] = []
    groups: dict[str, list[float]] = defaultdict(list)
    skipped: list[tuple[str, str]] = []
    out: dict[str, dict[str, object]] = {}
    if args.markdown:
        extra = " before |" if before else ""
        print(
            f"| row | model | GPUs | plan | published s | predicted s | error |{extra} "
            "MFU | mem GB | basis |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|" + ("---|" if before else ""))
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
        groups[r.get("group", "")].append(err)
        plan = plan_text(est.plan)  # under recompute auto: the level chosen, marked
        if est.recompute_auto is not None:
            plan = plan.replace(
                f" {est.plan.recompute.value}", f" auto:{est.plan.recompute.value}", 1
            )
        out[row.row_id] = {
            "published_s": row.published_s,
            "predicted_s": est.iteration_time_s,
            "error": err,
            "mfu": est.mfu,
            "memory_gb": est.memory.total_gb,
            "group": r.get("group", ""),
            "plan": plan,
        }
        if args.markdown:
            was = before.get(row.row_id)
            old = (f" {100 * was['error']:+.1f} % |" if was else " — |") if before else ""
            print(
                f"| {row.row_id} | {r['model']} | {r['gpus']} | {plan} | {row.published_s:.2f} "
                f"| {est.iteration_time_s:.2f} | {100 * err:+.1f} % |{old} {100 * est.mfu:.1f} % "
                f"| {est.memory.total_gb:.0f} | {row.basis} |"
            )
        else:
            print(
                f"{row.row_id:28s} {plan:40s} published {row.published_s:8.2f} s  "
                f"predicted {est.iteration_time_s:8.2f} s  {100 * err:+6.1f} %  "
                f"({time.perf_counter() - t0:.1f} s)",
                flush=True,
            )
    if errors:
        print("\n" + summary("all", errors))
        for g, errs in groups.items():
            print("  " + summary(g or "(no group)", errs))
    for rid, why in skipped:
        print(f"skipped {rid}: {why}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
