"""Replay accuracy of lumos against measured step times, on every real trace we have.

Converts each trace with `lumos convert`, replays it (`lumos compare`'s path: replay
mode, ranks aligned on their measured step starts when the ETs carry them), and prints
per trace, per rank first: each rank's simulated step against its own measured
`ProfilerStep` (the worst rank, and every rank's error for up to 8 ranks), then the
slowest rank's simulated step against the slowest measured step, the worst rank's
GPU-inclusive error (step start to the last end, GPU work included, on both sides), and
the same per-rank and overall errors for the ablation without cross-stream and sync
edges (`ablate_sync`, the dPRO-like graph). A trace with no measured `ProfilerStep` is
marked: it is compared with the span of its own recorded nodes. Run from the repository
root with the venv active:

    python scripts/accuracy_table.py [--markdown] [--only NAME ...] [--work DIR]

Fixtures are read from ../shared/fixtures (or $LUMOS_FIXTURES).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from lumos.simulator.report.compare import Comparison, compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import SimOptions, simulate

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("LUMOS_FIXTURES", ROOT.parent / "shared" / "fixtures"))
HTA = "HolisticTraceAnalysis/tests/data"
DLRM = "param/et_replay/tests/inputs"


@dataclass(frozen=True, slots=True)
class Case:
    """One trace: its inputs (relative to the fixtures or the repo) and what it is."""

    name: str
    inputs: tuple[str, ...]
    what: str
    ranks: tuple[int, ...] = ()  # simulate only these ranks' files (sampled jobs)


CASES = (
    Case(
        "dlrm",
        (f"@{DLRM}/dlrm_pytorch_et.tar.gz", f"@{DLRM}/dlrm_kineto.tar.gz"),
        "PARAM DLRM, 8×V100, NCCL; host ET + Kineto",
    ),
    Case("hta_alexnet", (f"@{HTA}/critical_path/alexnet",), "HTA AlexNet, 1×A100 (whole trace)"),
    Case(
        "hta_event_sync",
        (f"@{HTA}/critical_path/cuda_event_sync",),
        "HTA cuda_event_sync, 1×A100",
    ),
    Case(
        "hta_rank0_of16",
        (f"@{HTA}/negative_queue_length_values_check",),
        "HTA rank 0 of a 16-rank job, A100, NCCL",
    ),
    Case(
        "hta_sampled_r0",
        (f"@{HTA}/trace_filter/sampled_rank-0.json.gz",),
        "HTA rank 0 of a 128-rank job, A100, NCCL",
    ),
    Case(
        "hta_sampled_r1",
        (f"@{HTA}/trace_filter/sampled_rank-1.json.gz",),
        "HTA rank 1 of a 128-rank job, A100, NCCL",
    ),
    Case(
        "tracelens_bert",
        ("@TraceLens/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz",),
        "TraceLens BERT-small inference, 1×H100",
    ),
    Case("capture_ddp", ("tests/data/captures/ddp",), "our capture: DDP, 2 ranks, CPU/gloo"),
    Case("capture_fsdp", ("tests/data/captures/fsdp",), "our capture: FSDP2, 2 ranks, CPU/gloo"),
    Case(
        "capture_pipeline",
        ("tests/data/captures/pipeline",),
        "our capture: 2-stage pipeline, send/recv, CPU/gloo",
    ),
)


def resolve(spec: str) -> Path:
    return FIXTURES / spec[1:] if spec.startswith("@") else ROOT / spec


def convert_case(case: Case, out: Path, reuse: bool = False) -> Path:
    """`lumos convert` the case's inputs into `out` (kept if `reuse` and present)."""
    if not (reuse and any(out.glob("*.et"))):
        out.mkdir(parents=True, exist_ok=True)
        args = [str(resolve(s)) for s in case.inputs]
        cli = [sys.executable, "-c", "from lumos.cli.main import main; main()"]
        cmd = [*cli, "convert", *args, "-o", str(out), "--prefix", case.name]
        subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    return out


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the table."""

    case: Case
    ranks: int
    nodes: int
    full: Comparison
    ablated: Comparison
    aligned: bool
    seconds: float


def evaluate(case: Case, prefix: Path) -> Row:
    """Replay with and without sync edges and compare with the measured steps."""
    t0 = time.perf_counter()
    measured = read_measured(prefix)
    # some fixtures are single ranks of larger jobs (hta_rank0_of16, hta_sampled_r0/r1)
    full = simulate(prefix, SimOptions(allow_partial=True))
    ablated = simulate(prefix, SimOptions(ablate_sync=True, allow_partial=True))
    nodes = int(full.stats["nodes_total"])
    return Row(
        case,
        len(full.ranks),
        nodes,
        compare(full, measured),
        compare(ablated, measured),
        full.aligned,
        time.perf_counter() - t0,
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f}%"


def _ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f}"


HEADER = (
    "trace",
    "ranks",
    "nodes",
    "worst rank",
    "per-rank error",
    "slowest measured ms",
    "slowest simulated ms",
    "overall",
    "GPU-incl. worst",
    "no-sync worst rank",
    "no-sync overall",
)
MAX_LISTED = 8


def _worst(c: Comparison) -> str:
    worst = c.worst_rank
    if worst is None:
        return "-"
    who = f"r{worst.rank} " if len(c.ranks) > 1 else ""
    return who + _pct(worst.error_pct)


def _per_rank(c: Comparison) -> str:
    if len(c.ranks) > MAX_LISTED:
        return f"mean |{c.mean_abs_error_pct or 0.0:.2f}%|"
    return " ".join(_pct(r.error_pct) for r in c.ranks)


def row_cells(row: Row) -> list[str]:
    name = row.case.name + (" (aligned)" if row.aligned else "")
    if not row.full.measured:
        name += " (no ProfilerStep)"
    gpu = row.full.max_abs_gpu_error_pct
    return [
        name,
        str(row.ranks),
        f"{row.nodes:,}",
        _worst(row.full),
        _per_rank(row.full),
        _ms(row.full.measured_ns),
        _ms(row.full.simulated_ns),
        _pct(row.full.error_pct),
        "-" if gpu is None else f"{gpu:.2f}%",
        _worst(row.ablated),
        _pct(row.ablated.error_pct),
    ]


def summary(rows: list[Row]) -> tuple[float, float, float, float]:
    """Mean and max over traces of the worst rank's |error| (full model, then ablation)."""

    def worst(c: Comparison) -> float:
        return c.max_abs_rank_error_pct or 0.0

    full = [worst(r.full) for r in rows]
    abl = [worst(r.ablated) for r in rows]
    return sum(full) / len(full), max(full), sum(abl) / len(abl), max(abl)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="Print a Markdown table.")
    parser.add_argument("--only", nargs="*", help="Case names to run (default: all).")
    parser.add_argument("--work", type=Path, help="Folder for converted ETs (default: temp).")
    parser.add_argument(
        "--reuse", action="store_true", help="Keep ETs already converted in --work."
    )
    args = parser.parse_args()
    cases = [c for c in CASES if not args.only or c.name in args.only]
    work = args.work or Path(tempfile.mkdtemp(prefix="lumos-accuracy-"))
    rows = [evaluate(c, convert_case(c, work / c.name, args.reuse)) for c in cases]
    cells = [row_cells(r) for r in rows]
    if args.markdown:
        print("| " + " | ".join(HEADER) + " |")
        print("|" + "---|" * len(HEADER))
        for line in cells:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(HEADER)]
        print("  ".join(h.rjust(w) for h, w in zip(HEADER, widths, strict=True)))
        for line in cells:
            print("  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)))
    mean, worst, mean_abl, worst_abl = summary(rows)
    print(
        f"\nworst rank's |error|: mean over traces {mean:.2f}% (max {worst:.2f}%); "
        f"without sync edges {mean_abl:.2f}% (max {worst_abl:.2f}%)"
    )


if __name__ == "__main__":
    main()
