"""Writing an ASTRA-sim bundle folder, all or nothing.

Everything goes into a temporary sibling folder first: workload ETs, the four config files,
`run.sh` with the exact ASTRA-sim command line and a README. The pre-flight then loads that
folder as ASTRA-sim would; only when it passes is the folder renamed into place, so a
refused export never leaves a partial bundle behind.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lumos.converters.astra_sim.config import (
    AstraCommGroups,
    AstraMemoryConfig,
    AstraNetworkConfig,
    AstraSystemConfig,
)
from lumos.converters.astra_sim.config_files import (
    dump_astra_comm_groups,
    dump_astra_memory,
    dump_astra_network,
    dump_astra_system,
)
from lumos.converters.astra_sim.preflight import PreflightReport, preflight_bundle
from lumos.converters.chakra.stream import write_et
from lumos.errors import ExportError
from lumos.proto import pb

WORKLOAD_DIR = "workload"
DEFAULT_BINARY = "AstraSim_Analytical_Congestion_Unaware"
#: The binary of each analytical backend (`--astra-backend`).
BACKEND_BINARY = {
    "congestion-unaware": "AstraSim_Analytical_Congestion_Unaware",
    "congestion-aware": "AstraSim_Analytical_Congestion_Aware",
}
#: run.sh's exit status when ASTRA-sim exited 0 but some rank never printed its finish line.
UNFINISHED_EXIT = 3


@dataclass(frozen=True, slots=True)
class BundleFiles:
    """Everything a bundle holds, ready to write."""

    prefix: str
    workloads: Sequence[tuple[pb.GlobalMetadata, Sequence[pb.Node]]]
    system: AstraSystemConfig
    network: AstraNetworkConfig
    memory: AstraMemoryConfig
    comm_groups: AstraCommGroups
    backend: str = "congestion-unaware"


def run_command(prefix: str) -> list[str]:
    """ASTRA-sim's argv for a bundle, relative to the bundle folder (binary first)."""
    return [
        "${ASTRA_SIM_BIN}",
        f"--workload-configuration={WORKLOAD_DIR}/{prefix}",
        "--system-configuration=system.json",
        "--network-configuration=network.yml",
        "--remote-memory-configuration=memory.json",
        "--comm-group-configuration=comm_group.json",
    ]


def shell_command(prefix: str) -> str:
    """The command line as a shell reads it: every argument quoted, so a prefix holding
    spaces, quotes or `$(...)` stays one inert word."""
    args = run_command(prefix)
    return " ".join(['"$ASTRA_SIM_BIN"', *map(shlex.quote, args[1:])])


def run_script(prefix: str, ranks: int, backend: str = "congestion-unaware") -> str:
    """run.sh: runs the bundle, fails unless every rank printed its finish line, prints
    the step time (the slowest rank's finish)."""
    binary = BACKEND_BINARY[backend]
    args = " \\\n  ".join(shlex.quote(a) for a in run_command(prefix)[1:])
    return f"""#!/usr/bin/env bash
# Runs this bundle ({ranks} ranks) on ASTRA-sim 2.x's analytical {backend} backend.
# ASTRA_SIM_BIN: the ASTRA-sim binary (default: {binary} on PATH).
# Extra arguments are passed through. ASTRA-sim prints per rank
# 'sys[R] finished, T cycles, exposed communication X cycles' (1 cycle = 1 ns) and exits 0
# even when a rank never finishes; this script exits {UNFINISHED_EXIT} then, naming the ranks.
set -uo pipefail
cd "$(dirname "$0")" || exit 1
ASTRA_SIM_BIN=${{ASTRA_SIM_BIN:-{binary}}}
RANKS={ranks}
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
"$ASTRA_SIM_BIN" \\
  {args} \\
  "$@" 2>&1 | tee "$log"
status=${{PIPESTATUS[0]}}
if [ "$status" -ne 0 ]; then
  echo "run.sh: ASTRA-sim exited with status $status" >&2
  exit "$status"
fi
missing=()
for ((r = 0; r < RANKS; r++)); do
  grep -q "sys\\[$r\\] finished, " "$log" || missing+=("$r")
done
if [ "${{#missing[@]}}" -ne 0 ]; then
  echo "run.sh: ${{#missing[@]}} of $RANKS ranks never finished (ranks ${{missing[*]}})" >&2
  exit {UNFINISHED_EXIT}
fi
step=$(grep -oE 'sys\\[[0-9]+\\] finished, [0-9]+ cycles' "$log" \\
  | sed -E 's/.* finished, ([0-9]+) cycles/\\1/' | sort -n | tail -n 1)
echo "run.sh: all $RANKS ranks finished; step time $step ns (slowest rank)"
"""


def write_bundle(
    out_dir: str | Path,
    files: BundleFiles,
    readme: Callable[[PreflightReport], str],
    *,
    force: bool = False,
) -> PreflightReport:
    """Write, pre-flight and move a bundle into `out_dir`; returns the pre-flight report.

    Raises ExportError (and leaves nothing behind) if the pre-flight fails, or if
    `out_dir` exists and `force` is not set.
    """
    target = Path(out_dir)
    if target.exists() and not force:
        raise ExportError(f"{target} exists; pass --force to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        _write_files(tmp, files)
        report = preflight_bundle(tmp)
        (tmp / "README.md").write_text(readme(report))
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            target.rename(old)
            tmp.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return report


def _write_files(folder: Path, files: BundleFiles) -> None:
    for rank, (metadata, nodes) in enumerate(files.workloads):
        write_et(folder / WORKLOAD_DIR / f"{files.prefix}.{rank}.et", metadata, nodes)
    dump_astra_system(files.system, folder / "system.json")
    dump_astra_network(files.network, folder / "network.yml")
    dump_astra_memory(files.memory, folder / "memory.json")
    dump_astra_comm_groups(files.comm_groups, folder / "comm_group.json")
    script = folder / "run.sh"
    script.write_text(run_script(files.prefix, len(files.workloads), files.backend))
    script.chmod(0o755)
