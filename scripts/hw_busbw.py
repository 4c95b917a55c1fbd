"""Print the NCCL-like pricer's bus bandwidth by message size for the shipped systems.

busbw = 2(n−1)/n · S / t for all-reduce (nccl-tests' definition). Usage:
    python scripts/hw_busbw.py [--ranks 8 16 64]
"""

from __future__ import annotations

import argparse

from lumos.hwconfigs import load_system
from lumos.simulator.network.collectives import Kind
from lumos.simulator.network.nccl import make_pricer

SIZES = [8, 1 << 16, 1 << 20, 16 << 20, 128 << 20, 1 << 30, 8 << 30]


def _label(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 16, 64])
    args = parser.parse_args()
    rows = [
        ("h100", "ring"),
        ("h100", "nvls"),
        ("h100", "auto"),
        ("a100", "auto"),
        ("h100-roce", "auto"),
        ("h800", "auto"),
        ("a800", "auto"),
    ]
    for n in args.ranks:
        print(f"\nall-reduce, {n} ranks: bus bandwidth GB/s (time µs) [algorithm]")
        print("| system | algo | " + " | ".join(_label(s) for s in SIZES) + " |")
        print("|---|---|" + "---|" * len(SIZES))
        for hw, algo in rows:
            pricer = make_pricer(load_system(hw), all_reduce=algo)
            cells = []
            for size in SIZES:
                try:
                    name, t = pricer.price(Kind.ALL_REDUCE, size, list(range(n)))
                except ValueError:
                    cells.append("—")
                    continue
                cells.append(f"{2 * (n - 1) / n * size / t:.0f} ({t / 1000:.1f}) [{name}]")
            print(f"| {hw} | {algo} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
