"""Peak memory of `lumos whatif` against `simulate` on the same trace, per node.

    python scripts/whatif_memory.py [--gbs 64] [--model gpt3-125m] [--dp 2]

Writes a job's ETs with `lumos.estimate(..., output=DIR, all_ranks=True)` (a real model's
step; `--gbs` sets the micro-batches, so the node count), then in this one process
measures the peak resident memory (RSS sampled every 2 ms, above what the process held
before) of: `simulate` of the folder (the baseline),
`load_etset` (every rank's nodes as protobuf messages, what every edit works on), and
`run_whatif` with no edit (load, recover, normalise, two simulations). Prints each peak,
its bytes a node and its ratio to the baseline (`tracemalloc` would miss the protobuf
messages: the upb backend allocates them in C arenas). Each phase frees what it built
before the next, so later phases do not inherit earlier ones' growth beyond what the
allocator keeps; run phases in another order to check that.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def peak(label: str, work: Callable[[], Any]) -> tuple[int, Any]:
    """(peak resident bytes above the start, result) of `work()`: the process's RSS sampled
    every 2 ms by a thread, from a collected and trimmed heap (so protobuf's C++ arenas,
    which tracemalloc does not see, count)."""
    from lumos.simulator.heap import trim

    gc.collect()
    trim()
    start = rss()
    top = [start]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.002):
            top[0] = max(top[0], rss())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    began = time.process_time()
    result = work()
    done.set()
    sampler.join()
    grown = max(top[0], rss()) - start
    print(f"  {label}: {grown / 1e6:,.1f} MB peak in {time.process_time() - began:.1f} CPU s")
    return grown, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gpt3-125m")
    parser.add_argument("--dp", type=int, default=2)
    parser.add_argument("--gbs", type=int, default=64)
    args = parser.parse_args()

    import lumos
    from lumos.simulator.run import SimOptions, simulate
    from lumos.simulator.whatif.api import WhatIf, run_whatif
    from lumos.simulator.whatif.etset import load_etset

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "et"
        lumos.estimate(args.model, dp=args.dp, gbs=args.gbs, output=folder, all_ranks=True)
        ets = load_etset(folder)
        nodes = sum(len(r.nodes) for r in ets.ranks)
        del ets
        size = sum(p.stat().st_size for p in folder.iterdir())
        print(f"{args.model} dp {args.dp} gbs {args.gbs}: {nodes:,} nodes, {size / 1e6:.1f} MB")
        base, _ = peak("simulate (baseline)", lambda: simulate(folder, SimOptions()))
        rows = [("simulate", base)]
        rows.append(("load_etset", peak("load_etset", lambda: load_etset(folder))[0]))
        rows.append(("whatif", peak("whatif, no edit", lambda: run_whatif(folder, WhatIf()))[0]))
    print(f"{'phase':<12} {'B/node':>8} {'x simulate':>11}")
    for label, top in rows:
        print(f"{label:<12} {top / nodes:>8,.0f} {top / base:>11.1f}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"process max RSS {rss / 1e3:,.0f} MB")


if __name__ == "__main__":
    main()
