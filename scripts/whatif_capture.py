"""Capture the what-if ground-truth grid: one tiny GPT over layers, hidden, sequence, DP and PP.

Each configuration is captured `--runs` times with `scripts/capture_gpt.py` under
`torchrun` (CPU, gloo, one thread per rank), profiling `--steps` steps after two warm-up
steps, then converted to Chakra ETs:

    nice -n -5 python scripts/whatif_capture.py --out out/whatif --runs 7 --steps 6

writes `out/whatif/<config>/run<k>/` (the raw host ET + Kineto pairs),
`out/whatif/<config>/run<k>.capture.json` (the load average before and after, the host's
cores, the step converted) and
`out/whatif/<config>/run<k>-et/` (the converted ETs of the run's typical step,
`capture.representative_step`: the median of its steps after the first).
`scripts/whatif_table.py` predicts every configuration from the base one and prints the
table of docs/whatif.md. Nothing here is committed.

Configurations are interleaved (run k of every configuration, then run k+1), so a drift
in the machine's load hits all alike; every capture waits `--settle` seconds after the
previous one (its files flushed), and with `--max-load` until the 1-minute load average
is below that. All conversions run after all captures, so none of them competes with a
capture for the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lumos.converters.pytorch.capture import representative_step

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


def wait_quiet(max_load: float | None, settle: float, timeout: float = 600.0) -> None:
    """Sleep `settle` s after syncing the file system, then until the load is low."""
    os.sync()
    time.sleep(settle)
    deadline = time.monotonic() + timeout
    while max_load is not None and os.getloadavg()[0] > max_load:
        if time.monotonic() > deadline:
            print(f"load still {os.getloadavg()[0]:.2f} > {max_load}: capturing anyway")
            return
        time.sleep(5)


def capture(point: GridPoint, out: Path, port: int, steps: int) -> dict[str, object]:
    """torchrun the capture script for one run; what its `run<k>.capture.json` records."""
    out.mkdir(parents=True, exist_ok=True)
    torchrun = [sys.executable, "-m", "torch.distributed.run", f"--master-port={port}"]
    cmd = [
        *torchrun,
        f"--nproc-per-node={point.ranks}",
        str(ROOT / "scripts" / "capture_gpt.py"),
        f"--mode={point.mode}",
        f"--out={out}",
        f"--steps={steps}",
        *point.flags(),
    ]
    before = os.getloadavg()
    t0 = time.time()
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    return {
        "config": point.name,
        "started": t0,
        "seconds": round(time.time() - t0, 2),
        "loadavg_before": list(before),
        "loadavg_after": list(os.getloadavg()),
        "cpu_count": os.cpu_count(),
        "nice": os.nice(0),
        "command": cmd[2:],
    }


def convert(raw: Path) -> int:
    """Convert the run's typical step next to it (`run<k>-et`); the step's number."""
    step = representative_step(sorted(raw.glob("rank*.kineto.json*")))
    lumos = [sys.executable, "-c", "from lumos.cli.main import main; main()"]
    et_dir = raw.parent / f"{raw.name}-et"
    cmd = [*lumos, "convert", str(raw), "-o", str(et_dir), "--step", str(step), "--force"]
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True)
    return step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "out" / "whatif")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--steps", type=int, default=6, help="profiled steps per run")
    p.add_argument("--settle", type=float, default=3.0, help="seconds between captures")
    p.add_argument("--max-load", type=float, default=None, help="wait for a 1-min load below")
    p.add_argument("--only", nargs="*", default=None, help="configuration names")
    args = p.parse_args()
    points = [g for g in GRID if not args.only or g.name in args.only]
    port = 29600
    captured: list[Path] = []
    for run in range(args.runs):  # interleave configurations so drift hits all alike
        for point in points:
            raw = args.out / point.name / f"run{run}"
            meta = raw.parent / f"{raw.name}.capture.json"
            if meta.exists():
                captured.append(raw)
                continue
            wait_quiet(args.max_load, args.settle)
            port += 1
            info = capture(point, raw, port, args.steps)
            meta.write_text(json.dumps(info, indent=1))
            captured.append(raw)
            print(
                f"{point.name} run{run}: {info['seconds']} s, "
                f"load {info['loadavg_before'][0]:.2f} -> {info['loadavg_after'][0]:.2f}",  # type: ignore[index]
                flush=True,
            )
    for raw in captured:
        if not (raw.parent / f"{raw.name}-et").exists():
            step = convert(raw)
            meta = raw.parent / f"{raw.name}.capture.json"
            info = json.loads(meta.read_text())
            info["converted_step"] = step
            meta.write_text(json.dumps(info, indent=1))
            print(f"converted {raw} ProfilerStep#{step}", flush=True)


if __name__ == "__main__":
    main()
