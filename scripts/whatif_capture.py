"""Capture the what-if ground-truth grid: one tiny GPT over layers, hidden, sequence, DP and PP.

Each configuration is captured `--runs` times with `scripts/capture_gpt.py` under
`torchrun` (CPU, gloo, one thread per rank), profiling `--steps` steps after two warm-up
steps, then converted to Chakra ETs:

    nice -n -5 python scripts/whatif_capture.py --out out/whatif --runs 7 --steps 6 --max-busy 0.05

writes `out/whatif/<config>/run<k>/` (the raw host ET + Kineto pairs),
`out/whatif/<config>/run<k>.capture.json` (the load average before and after, the host's
cores, the step converted) and
`out/whatif/<config>/run<k>-et/` (the converted ETs of the run's typical step,
`capture.representative_step`: the median of its steps after the first).
`scripts/whatif_table.py` predicts every configuration from the base one and prints the
table of docs/whatif.md. Nothing here is committed.

Configurations are interleaved (run k of every configuration, then run k+1), so a drift
in the machine's load hits all alike; every capture waits `--settle` seconds after the
previous one (its files flushed), and with `--max-busy` until the CPUs were at most that
busy over 2 s (others' jobs; the load average would also count the previous capture). All conversions run after all captures, so none of them competes with a
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


def busy_fraction(seconds: float = 2.0) -> float:
    """Share of the host's CPU time spent busy over the next `seconds` (/proc/stat; the
    1-minute load average, over the cores, where there is no /proc/stat)."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except OSError:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    return 1.0 - (idle1 - idle0) / max(1, total1 - total0)


def wait_quiet(max_busy: float | None, settle: float, timeout: float = 900.0) -> float:
    """Flush the file system, sleep `settle` s, then wait until the host's CPUs are at
    most `max_busy` busy over 2 s (nobody else running now: the load average also counts
    the previous capture); the busy share measured last."""
    os.sync()
    time.sleep(settle)
    deadline = time.monotonic() + timeout
    busy = busy_fraction()
    while max_busy is not None and busy > max_busy:
        if time.monotonic() > deadline:
            print(f"CPUs still {busy:.0%} busy > {max_busy:.0%}: capturing anyway")
            break
        busy = busy_fraction()
    return busy


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
    p.add_argument(
        "--max-busy", type=float, default=None, help="wait until the CPUs are this idle (0-1)"
    )
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
            busy = wait_quiet(args.max_busy, args.settle)
            port += 1
            info = capture(point, raw, port, args.steps)
            info["busy_before"] = round(busy, 3)
            meta.write_text(json.dumps(info, indent=1))
            captured.append(raw)
            print(
                f"{point.name} run{run}: {info['seconds']} s, CPUs {busy:.0%} busy before, "
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
