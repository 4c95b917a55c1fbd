"""Predict every configuration of the what-if grid from the base captures; print the table.

Reads what `scripts/whatif_capture.py` wrote: `<root>/<config>/run<k>/` (the raw host ET
+ Kineto pairs; `run<k>.capture.json` beside it, with the host's load and cores) and
`<root>/<config>/run<k>-et/` (the converted step). Each base run is edited into every
other configuration and simulated (replay of the edited ETs).

The measured step of a run is the slowest rank's `ProfilerStep`; when the run profiled
several steps, the median over its steps after the first (the first carries the
profiler's start: the ranks enter it skewed by the execution-trace observer's setup).
Per configuration the table gives the measured runs' median and range, the predictions'
median and range (one per base run), the error of the medians, and the paired errors
(run k's prediction, from base run k, against run k's measurement, captured within the
same minute): their median and range. The noise floor is the base runs' own spread.

    python scripts/whatif_table.py --root out/whatif [--as-traced]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import get_attr
from lumos.converters.pytorch.capture import load_json, profiler_steps
from lumos.simulator.whatif.api import WhatIf, apply_edits, contended, recover
from lumos.simulator.whatif.etset import EtSet, load_etset, simulate_etset

ROOT = Path(__file__).resolve().parents[1]

#: configuration -> (edit as a command line, the edit)
EDITS: dict[str, tuple[str, WhatIf]] = {
    "layers4": ("--layers 4", WhatIf(layers=4)),
    "layers8": ("--layers 8", WhatIf(layers=8)),
    "hidden256": ("--hidden 256", WhatIf(hidden=256)),
    "seq128": ("--seq 128", WhatIf(seq=128)),
    "dp1": ("--dp 1", WhatIf(dp=1)),
    "pp2_layers2": (
        "--dp 1 --pp 2 --schedule gpipe --microbatches 2",
        WhatIf(dp=1, pp=2, schedule="gpipe", microbatches=2),
    ),
    "pp2_layers4": (
        "--layers 4 --dp 1 --pp 2 --schedule gpipe --microbatches 2",
        WhatIf(layers=4, dp=1, pp=2, schedule="gpipe", microbatches=2),
    ),
}


def step_times_ms(raw: Path) -> list[float]:
    """Per profiled step (in order): the slowest rank's ProfilerStep, from the raw Kineto
    traces (empty when the raw traces are not there)."""
    per_step: dict[str, float] = {}
    for path in sorted(raw.glob("rank*.kineto.json*")):
        for s in profiler_steps(load_json(path)):
            per_step[s.name] = max(per_step.get(s.name, 0.0), s.dur_ns / 1e6)
    return [per_step[k] for k in sorted(per_step, key=lambda n: int(n.rsplit("#", 1)[1]))]


def measured_ms(ets: EtSet, raw: Path | None = None) -> float:
    """The run's measured step (see module doc)."""
    steps = step_times_ms(raw) if raw is not None and raw.is_dir() else []
    if len(steps) >= 2:
        return statistics.median(steps[1:])
    return max(int(get_attr(r.metadata, cv.META_STEP_NS, 0)) for r in ets.ranks) / 1e6


def run_dirs(root: Path, config: str) -> list[Path]:
    return sorted((root / config).glob("run*-et"), key=lambda p: int(p.name[3:-3]))


def capture_load(root: Path, config: str, key: str) -> list[float]:
    """What each run recorded before its capture: `loadavg_before` (the 1-minute load
    average) or `busy_before` (the CPUs' busy share over 2 s), where recorded."""
    out = []
    for et_dir in run_dirs(root, config):
        meta = et_dir.parent / f"{et_dir.name[:-3]}.capture.json"
        if meta.is_file():
            value = json.loads(meta.read_text()).get(key)
            if value is not None:
                out.append(float(value[0] if isinstance(value, list) else value))
    return out


def _fmt(values: list[float], pct: bool = False) -> str:
    f = (lambda v: f"{v * 100:+.1f}%") if pct else (lambda v: f"{v:.1f}")
    return f"{f(statistics.median(values))} ({f(min(values))} to {f(max(values))})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", type=Path, default=ROOT / "out" / "whatif")
    p.add_argument("--as-traced", action="store_true", help="edit the bases as traced")
    args = p.parse_args()
    base_dirs = run_dirs(args.root, "base")
    base_ets = [load_etset(d) for d in base_dirs]
    bases = [recover(e, normalise=not args.as_traced) for e in base_ets]
    base_ms = [
        measured_ms(e, d.parent / d.name[:-3]) for e, d in zip(base_ets, base_dirs, strict=True)
    ]
    replay = [simulate_etset(e).iteration_time_ns / 1e6 for e in base_ets]
    normal = [simulate_etset(r.ets).iteration_time_ns / 1e6 for r in bases]
    loaded = [simulate_etset(contended(r, r.ets)).iteration_time_ns / 1e6 for r in bases]
    spread = (max(base_ms) - min(base_ms)) / statistics.median(base_ms) * 100
    print(f"base: {len(bases)} runs, measured {', '.join(f'{x:.1f}' for x in base_ms)} ms")
    print(f"base replay as traced: {', '.join(f'{x:.1f}' for x in replay)} ms")
    print(f"base replay normalised: {', '.join(f'{x:.1f}' for x in normal)} ms")
    print(f"base normalised + host contention: {', '.join(f'{x:.1f}' for x in loaded)} ms")
    rates = [r.normalised.contention.rate for r in bases]
    print(
        f"host contention rate (lost / oversubscribed time): {', '.join(f'{x:.3f}' for x in rates)}"
    )
    print(f"base spread (max-min)/median: {spread:.0f}%")
    loads = [x for c in ("base", *EDITS) for x in capture_load(args.root, c, "loadavg_before")]
    if loads:
        print(f"load average before the captures: {min(loads):.2f}-{max(loads):.2f}")
    busy = [x for c in ("base", *EDITS) for x in capture_load(args.root, c, "busy_before")]
    if busy:
        print(f"CPUs busy before the captures: {min(busy):.0%}-{max(busy):.0%}")
    print()
    print(
        "| config | edit | runs | measured median (min-max) ms | predicted median (min-max) ms "
        "| error of medians | paired error median (min to max) |"
    )
    print("|---|---|---|---|---|---|---|")
    for config, (flags, spec) in EDITS.items():
        dirs = run_dirs(args.root, config)
        measured = [measured_ms(load_etset(d), d.parent / d.name[:-3]) for d in dirs]
        if not measured:
            continue
        pred = [simulate_etset(apply_edits(b, spec)[0]).iteration_time_ns / 1e6 for b in bases]
        m, q = statistics.median(measured), statistics.median(pred)
        paired = [p / x - 1 for p, x in zip(pred, measured, strict=False)]
        print(
            f"| {config} | `{flags}` | {len(measured)} "
            f"| {m:.1f} ({min(measured):.1f}-{max(measured):.1f}) "
            f"| {q:.1f} ({min(pred):.1f}-{max(pred):.1f}) | {(q / m - 1) * 100:+.1f}% "
            f"| {_fmt(paired, pct=True)} |"
        )


if __name__ == "__main__":
    main()
