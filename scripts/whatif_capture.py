"""Capture the what-if ground-truth grid: one tiny GPT over layers, hidden, sequence, DP and PP.

Each configuration is captured `--runs` times with `scripts/capture_gpt.py` under
`torchrun` (CPU, gloo, one thread per rank) and converted to Chakra ETs:

    python scripts/whatif_capture.py --out out/whatif --runs 3

writes `out/whatif/<config>/run<k>/` (the raw host ET + Kineto pairs) and
`out/whatif/<config>/run<k>-et/` (the converted ETs). `scripts/whatif_table.py` predicts
every configuration from the base one and prints the table of docs/whatif.md. Nothing here
is committed: the captures are regenerated on demand.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, slots=True)
class GridPoint:
    """One captured configuration: its name, capture mode, ranks and model flags."""

    name: str
    mode: str
    ranks: int
    layers: int = 2
    hidden: int = 128
    seq: int = 64

    def flags(self) -> list[str]:
        return [
            f"--layers={self.layers}",
            f"--hidden={self.hidden}",
            f"--seq={self.seq}",
            "--heads=4",
            "--batch=4",
            "--micro-batches=2",
        ]


BASE = GridPoint("base", "ddp", 2)
GRID = (
    BASE,
    GridPoint("layers4", "ddp", 2, layers=4),
    GridPoint("layers8", "ddp", 2, layers=8),
    GridPoint("hidden256", "ddp", 2, hidden=256),
    GridPoint("seq128", "ddp", 2, seq=128),
    GridPoint("dp1", "ddp", 1),
    GridPoint("pp2_layers2", "pipeline", 2, layers=2),
    GridPoint("pp2_layers4", "pipeline", 2, layers=4),
)


def capture(point: GridPoint, out: Path, port: int) -> None:
    """torchrun the capture script for one run, then convert it to ETs."""
    out.mkdir(parents=True, exist_ok=True)
    torchrun = [sys.executable, "-m", "torch.distributed.run", f"--master-port={port}"]
    cmd = [
        *torchrun,
        f"--nproc-per-node={point.ranks}",
        str(ROOT / "scripts" / "capture_gpt.py"),
        f"--mode={point.mode}",
        f"--out={out}",
        *point.flags(),
    ]
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    lumos = [sys.executable, "-c", "from lumos.cli.main import main; main()"]
    et_dir = out.parent / f"{out.name}-et"
    subprocess.run([*lumos, "convert", str(out), "-o", str(et_dir)], check=True, cwd=ROOT)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "out" / "whatif")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--only", nargs="*", default=None, help="configuration names")
    args = p.parse_args()
    points = [g for g in GRID if not args.only or g.name in args.only]
    port = 29600
    for run in range(args.runs):  # interleave configurations so drift hits all alike
        for point in points:
            target = args.out / point.name / f"run{run}"
            if (args.out / point.name / f"run{run}-et").exists():
                continue
            t0 = time.perf_counter()
            port += 1
            capture(point, target, port)
            print(f"{point.name} run{run}: {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
