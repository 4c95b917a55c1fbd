"""The command line that runs a bundle on ASTRA-sim, and the bundle's run.sh.

Every argument written into the script is shell-quoted: the workload prefix comes from
file or tar-member names, so a name holding spaces, quotes or `$(...)` must reach
ASTRA-sim as one inert word (issue 11). ASTRA-sim exits 0 even when a rank never
finishes, so run.sh checks that every rank printed its `sys[N] finished` line, and
prints the step time (the slowest rank's finish).
"""

from __future__ import annotations

import shlex

WORKLOAD_DIR = "workload"
DEFAULT_BINARY = "AstraSim_Analytical_Congestion_Unaware"
#: The binary of each analytical backend (`--astra-backend`).
BACKEND_BINARY = {
    "congestion-unaware": "AstraSim_Analytical_Congestion_Unaware",
    "congestion-aware": "AstraSim_Analytical_Congestion_Aware",
}
#: run.sh's exit status when ASTRA-sim exited 0 but some rank never printed its finish line.
UNFINISHED_EXIT = 3


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
