"""Run every config.json in the given folders through `lumos estimate` and report which
are estimated and which refused, with the reason (the sweep of docs/estimate.md "Real
config.json files from the wild").

    python scripts/sweep_configs.py [DIR_OR_FILE ...] [--json OUT]

Default folder: tests/data/model_configs. Each file is read (`load_model`) and estimated
on H100 with TP T and DP 8/T (GBS 8, seq 2048) for the smallest T in 1, 2, 4, 8 whose
memory fits one GPU, else at TP 8 with its memory reported. A ConfigError is a refusal
(its message, less the file's path, is the reason); any other exception is a crash and
the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from lumos.api import estimate
from lumos.errors import ConfigError
from lumos.simulator.workload.spec import load_model

DEFAULT = Path(__file__).resolve().parents[1] / "tests" / "data" / "model_configs"


def _files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for path in paths:
        out.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    return out


def _model_type(path: Path) -> str:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return "?"
    kind = data.get("model_type") if isinstance(data, dict) else None
    return str(kind) if kind is not None else "-"


def sweep_one(path: Path) -> dict[str, Any]:
    """The outcome of one file: estimated (with params and the plan) or refused (reason)."""
    row: dict[str, Any] = {"file": path.name, "model_type": _model_type(path)}
    try:
        spec = load_model(path)
    except ConfigError as exc:
        reason = str(exc).removeprefix(f"{path}: ").split("\n")[0]
        row.update(outcome="refused", reason=reason)
        return row
    row["params_b"] = round(spec.params() / 1e9, 3)
    result: dict[str, Any] = {}
    plan_error = "no TP in 1, 2, 4, 8 divides its heads and key/value heads"
    for tp in (1, 2, 4, 8):
        if spec.heads % tp or spec.kv_heads % tp:
            continue
        try:
            result = estimate(path, hw="h100", tp=tp, dp=8 // tp, gbs=8, seq=2048).to_json()
        except ConfigError as exc:  # this plan, not the file: try the next TP
            plan_error = str(exc).removeprefix(f"{path}: ").split("\n")[0]
            continue
        row["tp"] = tp
        if result.get("fits_in_memory"):
            break
    if not result:
        row.update(outcome="refused", reason=f"every plan refused: {plan_error}")
        return row
    row.update(
        outcome="estimated",
        step_s=round(result["iteration_time_s"], 3),
        memory_gb=round(result["memory_gb_per_gpu"], 1),
        fits=bool(result.get("fits_in_memory")),
    )
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", type=Path, default=[DEFAULT])
    ap.add_argument("--json", type=Path, help="write the rows here as JSON")
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)  # the wrappers' and defaults' notes: one line a file here
    try:
        rows, crashed = _sweep(_files(args.paths))
    finally:
        logging.disable(logging.NOTSET)
    counts = {k: sum(r["outcome"] == k for r in rows) for k in ("estimated", "refused", "crash")}
    print(f"{len(rows)} files: {counts['estimated']} estimated / {counts['refused']} refused / "
          f"{counts['crash']} crashed")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 1 if crashed else 0


def _sweep(files: list[Path]) -> tuple[list[dict[str, Any]], int]:
    """Each file's row (printed as it comes) and the number of crashes."""
    rows, crashed = [], 0
    for path in files:
        try:
            row = sweep_one(path)
        except Exception as exc:  # a crash is what the sweep looks for
            row = {"file": path.name, "model_type": _model_type(path), "outcome": "crash",
                   "reason": f"{type(exc).__name__}: {exc}"}  # fmt: skip
            crashed += 1
        rows.append(row)
        what = (
            f"{row['params_b']} B, TP{row['tp']}, {row['step_s']} s, {row['memory_gb']} GB"
            if row["outcome"] == "estimated"
            else row["reason"]
        )
        print(f"{row['file']:45s} {row['model_type']:18s} {row['outcome']:9s} {what}")
    return rows, crashed


if __name__ == "__main__":
    sys.exit(main())
