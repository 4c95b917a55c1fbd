"""Scale benchmarks of `bench_simulate.py`: real ranks, loaded and replayed in fresh processes.

Each case runs in a child process that imports first and then times only the work, and
reports its wall time and peak resident memory (its own `VmHWM`: `ru_maxrss` of a fresh
process keeps the bench's peak from before the exec; the worker processes' largest
`ru_maxrss` separately). Inputs are built once into `CACHE` and reused:

- the 4x DLRM rank (`bench_convert.make_inputs`, 312 copies of DLRM rank 0's iteration,
  converted by `lumos convert`: 1.26M nodes, 405 MB);
- the 8 converted DLRM ranks of the param fixture;
- jobs of N ranks made by `make_job.py` from a base rank (DLRM rank 0 with `--copies`
  copies of its iteration, ~4k nodes per copy), each duration jittered per rank.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("LUMOS_BENCH_CACHE", "/tmp/lumos_bench"))
FIX = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "param/et_replay/tests/inputs"

CHILD = """
import json, os, resource, sys, time
mode, target = sys.argv[1], sys.argv[2]
if mode != "info":
    import lumos.simulator.run, lumos.simulator.load
with open("/proc/self/statm") as f:  # resident after the imports: the interpreter's share
    start = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
if mode == "info":
    from lumos.converters.chakra.files import find_et_sources
    from lumos.converters.chakra.info import trace_info
    t = time.perf_counter()
    n = trace_info(find_et_sources(target)).total_nodes
elif mode == "load":
    from lumos.simulator.load import load_graphs
    t = time.perf_counter()
    n = sum(len(g) for g in load_graphs(target))
else:
    from lumos.simulator.run import SimOptions, simulate
    t = time.perf_counter()
    r = simulate(target, SimOptions(timelines=mode == "simulate", allow_partial=True))
    n = r.stats["nodes_total"]
wall = time.perf_counter() - t
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
with open("/proc/self/status") as f:  # this image's peak: ru_maxrss keeps the parent's from
    hwm = [l for l in f if l.startswith("VmHWM:")]  # before the exec (the bench, holding a job)
peak = int(hwm[0].split()[1]) * 1024 if hwm else me.ru_maxrss * 1024
print(json.dumps({"wall": wall, "nodes": n, "peak": peak, "start": start,
    "workers": kids.ru_maxrss * 1024, "cpu": me.ru_utime + me.ru_stime,
    "cpu_workers": kids.ru_utime + kids.ru_stime}))
"""


def child(mode: str, target: Path) -> dict[str, Any]:
    """Run one case in a fresh process; its JSON report."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(target)], capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(f"{mode} {target} failed:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def wall_of(cmd: list[str], env: dict[str, str] | None = None) -> float:
    """Wall seconds of a command, process start to exit."""
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - t0


def cached_bytecode_env() -> dict[str, str]:
    """This environment with Python's bytecode cache on, as on a user's machine (the
    sessions here set PYTHONDONTWRITEBYTECODE, which recompiles every lumos module on
    every start: ~0.1 s idle)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _convert(inputs: list[Path], out: Path, prefix: str) -> Path:
    if not (out / "done").exists():
        from lumos.converters.pytorch.convert import convert

        out.mkdir(parents=True, exist_ok=True)
        convert(inputs, out, prefix=prefix)
        (out / "done").write_text("")
    return out / prefix


def dlrm_rank(copies: int) -> Path:
    """DLRM rank 0 with `copies` copies of its iteration, converted (cached)."""
    out = CACHE / f"dlrm_copies{copies}"
    if not (out / "done").exists():
        from bench_convert import make_inputs

        raw = CACHE / f"dlrm_copies{copies}_inputs"
        raw.mkdir(parents=True, exist_ok=True)
        make_inputs(copies, raw)
        _convert([raw], out, "rank")
        shutil.rmtree(raw)
    return out / "rank.0.et"


def dlrm_8_ranks() -> Path:
    """The 8 DLRM ranks of the param fixture, converted (cached)."""
    inputs = [FIX / "dlrm_pytorch_et.tar.gz", FIX / "dlrm_kineto.tar.gz"]
    return _convert(inputs, CACHE / "dlrm8", "dlrm")


def job(base: Path, ranks: int) -> Path:
    """A job of `ranks` jittered copies of `base` (made by make_job.py; cached)."""
    from make_job import make_job

    out = CACHE / f"job_{base.parent.name}_{ranks}"
    if not (out / "done").exists():
        make_job(base, out, ranks)
        (out / "done").write_text("")
    return out / "job"


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f}"


def load_case(repeat: int) -> None:
    """The 4x DLRM rank: load_graphs vs the streaming `et info` read of the same file."""
    rank = dlrm_rank(312)
    print(f"\n4x DLRM rank: {rank} ({rank.stat().st_size / 1e6:,.0f} MB)")
    for _ in range(repeat):
        info = child("info", rank)
        load = child("load", rank)
        n = load["nodes"]
        cpu = load["cpu"] + load["cpu_workers"]
        print(
            f"  et info {info['wall']:.2f} s ({n / info['wall']:,.0f} nodes/s, "
            f"peak {mb(info['peak'])} MB) | load {load['wall']:.2f} s "
            f"({n / load['wall']:,.0f} nodes/s) = {info['wall'] / load['wall']:.2f}x et info; "
            f"peak RSS {mb(load['peak'])} MB = {load['peak'] / n:.0f} B/node "
            f"(worker {mb(load['workers'])} MB); CPU s: et info {info['cpu']:.2f}, load "
            f"{cpu:.2f} ({info['cpu'] / cpu:.2f}x; {n / cpu:,.0f} nodes per CPU s)"
        )


def dlrm8_case(repeat: int) -> None:
    """`lumos simulate` of the 8 DLRM ranks end to end, against `lumos --version`."""
    prefix = dlrm_8_ranks()
    lumos = str(Path(sys.executable).with_name("lumos"))
    env = cached_bytecode_env()
    wall_of([lumos, "simulate", str(prefix), "--json"], env)  # writes the bytecode cache
    for _ in range(repeat):
        version = wall_of([lumos, "--version"], env)
        sim = wall_of([lumos, "simulate", str(prefix), "--json"], env)
        print(
            f"8-rank DLRM replay end to end: {sim:.3f} s (lumos --version {version:.3f} s, "
            f"{sim / version:.1f}x); target < 0.5 s: {'PASS' if sim < 0.5 else 'FAIL'}"
        )


def scaling_case(ranks_list: list[int], copies: int, keep: bool, timelines: bool = True) -> None:
    """Replay jobs of N jittered ranks; one markdown row per N. Without `timelines`,
    the runs keep steps and breakdowns only (`SimOptions.timelines`)."""
    base = dlrm_rank(copies)
    kept = "with timelines" if timelines else "no timelines"
    print(f"\nbase rank: {base} ({base.stat().st_size / 1e6:,.0f} MB); {kept}")
    print(
        "| ranks | nodes | nodes/rank | wall s | nodes/s | CPU s | peak RSS MB | B/node "
        "| B/node over imports | worker MB |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for ranks in ranks_list:
        target = job(base, ranks)
        r = child("simulate" if timelines else "simulate-lean", target)
        n = r["nodes"]
        print(
            f"| {ranks} | {n:,} | {n // ranks:,} | {r['wall']:.1f} | {n / r['wall']:,.0f} | "
            f"{r['cpu'] + r['cpu_workers']:.1f} | {mb(r['peak'])} | {r['peak'] / n:.0f} | "
            f"{(r['peak'] - r['start']) / n:.0f} | {mb(r['workers'])} |",
            flush=True,
        )
        if not keep:
            shutil.rmtree(target.parent)
