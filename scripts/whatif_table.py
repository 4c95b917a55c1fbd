"""Predict every configuration of the what-if grid from the base captures; print the table.

Reads what `scripts/whatif_capture.py` wrote (`out/whatif/<config>/run<k>-et/`). Each
base run is edited into every other configuration and simulated (replay of the edited
ETs); each configuration's runs give the measured step (`measured_step_ns`, the slowest
rank's Kineto `ProfilerStep`). The table compares the median prediction with the median
measurement; because the shared machine's load moves single runs by tens of per cent, it
also compares the fastest prediction with the fastest measurement, and run k's
prediction (from base run k) with run k's measurement (captured minutes apart, under
about the same load; the median of those paired errors).

    python scripts/whatif_table.py --root out/whatif
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import get_attr
from lumos.simulator.whatif.api import WhatIf, apply_edits, recover
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


def measured_ms(ets: EtSet) -> float:
    return max(int(get_attr(r.metadata, cv.META_STEP_NS, 0)) for r in ets.ranks) / 1e6


def runs(root: Path, config: str) -> list[EtSet]:
    return [load_etset(p) for p in sorted((root / config).glob("run*-et"))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", type=Path, default=ROOT / "out" / "whatif")
    args = p.parse_args()
    bases = [recover(e) for e in runs(args.root, "base")]
    base_ms = [measured_ms(r.ets) for r in bases]
    sim_ms = [simulate_etset(r.ets).iteration_time_ns / 1e6 for r in bases]
    spread = (max(base_ms) - min(base_ms)) / statistics.median(base_ms) * 100
    print(f"base: {len(bases)} runs, measured {', '.join(f'{x:.1f}' for x in base_ms)} ms")
    print(f"base replay: {', '.join(f'{x:.1f}' for x in sim_ms)} ms")
    print(f"base spread (max-min)/median: {spread:.0f}%")
    print()
    print(
        "| config | edit | runs | measured median (min-max) ms | predicted median (min-max) ms "
        "| error (medians) | error (fastest) | error (paired) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for config, (flags, spec) in EDITS.items():
        measured = [measured_ms(e) for e in runs(args.root, config)]
        if not measured:
            continue
        pred = [simulate_etset(apply_edits(b, spec)[0]).iteration_time_ns / 1e6 for b in bases]
        m, q = statistics.median(measured), statistics.median(pred)
        paired = statistics.median(p / x - 1 for p, x in zip(pred, measured, strict=False))
        print(
            f"| {config} | `{flags}` | {len(measured)} "
            f"| {m:.1f} ({min(measured):.1f}-{max(measured):.1f}) "
            f"| {q:.1f} ({min(pred):.1f}-{max(pred):.1f}) | {(q / m - 1) * 100:+.1f}% "
            f"| {(min(pred) / min(measured) - 1) * 100:+.1f}% | {paired * 100:+.1f}% |"
        )


if __name__ == "__main__":
    main()
