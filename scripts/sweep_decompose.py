"""Split a published sequence sweep into per-token and per-key cost, next to lumos' split.

A benchmark that runs one model at several sequence lengths on the same GPUs (MosaicML's
llm-foundry tables: 512 … 65,536 tokens) gives a model-free decomposition of its step
time: per token, a training step costs `c + k·s` — `c` the work that grows with tokens
(the linear layers' GEMMs, norms, element-wise ops, the optimizer and FSDP per token of
the batch), `k·s` the attention, whose FLOPs per token grow with the keys it sees. Both
are fitted (least squares) to the published step times of each sweep (group, model, GPUs,
recompute, precision) and, the same way, to lumos' estimates of the same rows; their ratios
say which part lumos prices off, on each GPU, without assuming a kernel model. `k` also
gives the attention's achieved rate: 2·layers·width FLOPs per token and key for each causal
forward pass (flash attention's convention: backward 2.5 forwards, a recompute one more).

A diagnosis tool (docs/estimate.md, "Why non-NVIDIA stacks run slower on H100"): nothing
here is fitted into lumos.

    python scripts/sweep_decompose.py --heldout2 --groups G4,G9 [--json OUT]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lumos.simulator.workload import ParallelPlan, Recompute, estimate

sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_published as vp


@dataclass(frozen=True, slots=True)
class Line:
    """`c + k·s`: per-token cost `c` (µs) and per-token, per-key cost `k` (ns)."""

    c_us: float
    k_ns: float


@dataclass(frozen=True, slots=True)
class Sweep:
    """One sweep's published and estimated split, and the attention rate each implies."""

    group: str
    model: str
    hw: str
    gpus: int
    recompute: str
    precision: str
    seqs: tuple[int, ...]
    published: Line
    lumos: Line
    #: attention TFLOP/s implied by `k` (published, lumos)
    published_attention_tflops: float
    lumos_attention_tflops: float

    @property
    def c_ratio(self) -> float:
        """Published over lumos' per-token cost (> 1: lumos too fast there)."""
        return self.published.c_us / self.lumos.c_us

    @property
    def k_ratio(self) -> float:
        """Published over lumos' per-key (attention) cost."""
        return self.published.k_ns / self.lumos.k_ns


def fit_line(seqs: list[int], us_per_token: list[float]) -> Line:
    """Least-squares `c + k·s` through (sequence, µs a token); raises ValueError with fewer
    than two distinct sequences."""
    n = len(seqs)
    if n != len(us_per_token) or len(set(seqs)) < 2:
        raise ValueError("a sweep needs at least two distinct sequence lengths")
    ms, mt = sum(seqs) / n, sum(us_per_token) / n
    sxx = sum((s - ms) ** 2 for s in seqs)
    k = sum((s - ms) * (t - mt) for s, t in zip(seqs, us_per_token, strict=True)) / sxx
    return Line(c_us=mt - k * ms, k_ns=k * 1e3)


def attention_passes(plan: ParallelPlan) -> float:
    """Causal forward passes of flash attention in one step: forward 1, backward 2.5, and
    one more where recomputation re-runs it (full, or selective with `core_attn`)."""
    rerun = plan.recompute is Recompute.FULL or "core_attn" in plan.selective_modules
    return 3.5 + (1.0 if rerun else 0.0)


def _us_per_token(step_s: float, plan: ParallelPlan) -> float:
    return step_s * plan.world / (plan.gbs * plan.seq) * 1e6


def _rate(flops_per_key: float, k_ns: float) -> float:
    return flops_per_key / (k_ns * 1e-9) / 1e12 if k_ns > 0 else float("inf")


def decompose(rows: list[dict[str, str]], groups: tuple[str, ...] = ()) -> list[Sweep]:
    """Every sweep (≥ 2 sequence lengths) among the rows of the given group prefixes."""
    sweeps: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
    for r in rows:
        if groups and not r.get("group", "").startswith(groups):
            continue
        row = vp.parse(r)
        if isinstance(row, str):
            continue
        p = row.plan
        key = (r["group"].split()[0], row.model.name, row.hw, p.world, p.recompute.value)
        sweeps[(*key, p.precision.value)].append(row)
    out = []
    for key, members in sweeps.items():
        seqs = [m.plan.seq for m in members]
        if len(set(seqs)) < 2:
            continue
        pub = [_us_per_token(m.published_s, m.plan) for m in members]
        est = [
            _us_per_token(estimate(m.model, m.plan, m.hw).iteration_time_s, m.plan) for m in members
        ]
        model, plan = members[0].model, members[0].plan
        flops = 2.0 * model.layers * model.attention_width * attention_passes(plan)
        published, lumos = fit_line(seqs, pub), fit_line(seqs, est)
        out.append(
            Sweep(
                *key[:5],
                precision=key[5],
                seqs=tuple(sorted(seqs)),
                published=published,
                lumos=lumos,
                published_attention_tflops=_rate(flops, published.k_ns),
                lumos_attention_tflops=_rate(flops, lumos.k_ns),
            )
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--csv", type=Path, default=None)
    ap.add_argument("--heldout2", action="store_true", help="use heldout2_h100.csv")
    ap.add_argument("--groups", default="", help="group-name prefixes, comma-separated")
    ap.add_argument("--json", type=Path, default=None, help="write the sweeps here")
    args = ap.parse_args()
    path = args.csv or (vp.HELDOUT2 if args.heldout2 else vp.CSV)
    groups = tuple(g for g in args.groups.split(",") if g)
    sweeps = decompose(list(csv.DictReader(path.open())), groups)
    print(
        f"{'group':5} {'model':12} {'hw':5} {'gpus':>4} {'recompute':9} {'n':>2} "
        f"{'c pub/lumos us':>16} {'ratio':>6} {'k pub/lumos ns':>16} {'ratio':>6} "
        f"{'attn TFLOP/s pub/lumos':>22}"
    )
    for s in sweeps:
        print(
            f"{s.group:5} {s.model[:12]:12} {s.hw:5} {s.gpus:4d} {s.recompute:9} "
            f"{len(s.seqs):2d} {s.published.c_us:7.1f}/{s.lumos.c_us:<8.1f} "
            f"{s.c_ratio:6.3f} {s.published.k_ns:7.3f}/{s.lumos.k_ns:<8.3f} "
            f"{s.k_ratio:6.3f} {s.published_attention_tflops:10.0f}/"
            f"{s.lumos_attention_tflops:<11.0f}"
        )
    if args.json:
        args.json.write_text(json.dumps([asdict(s) for s in sweeps], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
