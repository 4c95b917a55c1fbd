"""Running a bundle on the real ASTRA-sim binary and reading its per-rank finish times.

ASTRA-sim prints `sys[R] finished, T cycles, exposed communication X cycles.` once per
rank that completes (1 cycle = 1 ns) and exits 0 even when a rank never finishes, so a
run is complete only when every rank 0..N-1 printed its line. `run_bundle` runs the same
command line as the bundle's `run.sh` and raises if the binary fails, times out or leaves
a rank unfinished. Its logs go to a temporary folder (`--logging-folder`): by default the
binary writes `log/` into the bundle, which `export --force` then refuses to delete as a
file it did not write, so a second export or benchmark run of the same bundle failed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from lumos.converters.astra_sim.run_script import BACKEND_BINARY, run_command
from lumos.errors import ConfigError, ExportError

FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")
#: the binary's own error lines worth showing when it fails
_ERROR_LINE = re.compile(r"\] \[(critical|error)\]|terminate|what\(\)|Assertion", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class BinaryRun:
    """One run of the binary on a bundle: finish time per rank (ns), wall seconds."""

    binary: str
    finish_ns: list[int]
    wall_s: float

    @property
    def step_ns(self) -> int:
        return max(self.finish_ns)


def find_binary(backend: str = "congestion-unaware") -> str:
    """The binary to run: $ASTRA_SIM_BIN, else the backend's binary on PATH.

    Raises ConfigError when neither exists.
    """
    env = os.environ.get("ASTRA_SIM_BIN")
    if env:
        if not (Path(env).is_file() and os.access(env, os.X_OK)):
            raise ConfigError(f"ASTRA_SIM_BIN={env} is not an executable file")
        return env
    name = BACKEND_BINARY[backend]
    found = shutil.which(name)
    if found is None:
        raise ConfigError(
            f"no ASTRA-sim binary: set ASTRA_SIM_BIN to {name} (build it with "
            "../shared/tools/astra-sim/build.sh) or put it on PATH"
        )
    return found


def parse_finishes(output: str, ranks: int) -> tuple[list[int], list[int]]:
    """(finish ns per rank, ranks that printed no finish line) from the binary's output."""
    seen: dict[int, int] = {}
    for match in FINISHED.finditer(output):
        seen[int(match[1])] = int(match[2])
    missing = [r for r in range(ranks) if r not in seen]
    return [seen.get(r, -1) for r in range(ranks)], missing


def run_bundle(bundle: str | Path, binary: str, ranks: int, timeout_s: float = 600) -> BinaryRun:
    """Run `binary` on a bundle folder. Raises ExportError if it fails, times out or
    leaves a rank unfinished (naming the ranks and the binary's error lines)."""
    root = Path(bundle)
    t0 = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="lumos-astra-log-") as logs:
            argv = [binary, *run_command_args(root), "--logging-folder", logs]
            proc = subprocess.run(
                argv, cwd=root, capture_output=True, text=True, timeout=timeout_s, check=False
            )
    except subprocess.TimeoutExpired:
        raise ExportError(
            f"{root}: ASTRA-sim ({binary}) ran past {timeout_s:.0f} s; a rank probably waits "
            "forever"
        ) from None
    except OSError as exc:
        raise ExportError(f"{root}: cannot run {binary}: {exc.strerror}") from None
    wall = time.perf_counter() - t0
    output = proc.stdout + proc.stderr
    finish, missing = parse_finishes(output, ranks)
    if proc.returncode != 0 or missing:
        errors = [line for line in output.splitlines() if _ERROR_LINE.search(line)][-5:]
        what = (
            f"exited with status {proc.returncode}"
            if proc.returncode
            else f"left {len(missing)} of {ranks} ranks unfinished (ranks {missing[:16]})"
        )
        raise ExportError(
            f"{root}: ASTRA-sim ({binary}) {what}" + "".join(f"\n  {e}" for e in errors)
        )
    return BinaryRun(binary, finish, wall)


def run_command_args(root: Path) -> list[str]:
    """run.sh's arguments for the bundle at `root` (its workload prefix read from disk)."""
    names = sorted(p.name for p in (root / "workload").glob("*.0.et"))
    if len(names) != 1:
        raise ExportError(f"{root}/workload: expected one <prefix>.0.et, found {names}")
    return run_command(names[0][: -len(".0.et")])[1:]
