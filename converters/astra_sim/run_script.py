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
    the step time (the slowest rank's finish).

    It writes nothing into the bundle: ASTRA-sim's logs (`log.log`, `err.log`, which it
    appends to) go to $ASTRA_SIM_LOG_DIR, a folder that must not hold an earlier run's
    logs, or else to a fresh temporary folder, named at the end. The bundle's folder is
    found from $0 without `dirname` or `$(...)`, so a path holding spaces, `$`, `;`,
    backticks, quotes, newlines or a leading `-` is one word throughout. ASTRA-sim's
    Chakra feeder opens each ET in append mode (`std::ifstream` with `ios::app`, fopen's
    "a+"), which a read-only file refuses: on a read-only bundle the script runs from a
    temporary copy, removed when it ends."""
    binary = BACKEND_BINARY[backend]
    args = " \\\n  ".join(shlex.quote(a) for a in run_command(prefix)[1:])
    first = f"{WORKLOAD_DIR}/{shlex.quote(prefix)}"
    return f"""#!/usr/bin/env bash
# Runs this bundle ({ranks} ranks) on ASTRA-sim 2.x's analytical {backend} backend.
# ASTRA_SIM_BIN: the ASTRA-sim binary (default: {binary} on PATH).
# ASTRA_SIM_LOG_DIR: the folder for ASTRA-sim's log.log and err.log (made if missing;
#   refused if it holds an earlier run's logs); default: a new temporary folder. Nothing
#   is written into this bundle, so it may be read-only and runs never mix their logs.
# Extra arguments are passed through. ASTRA-sim prints per rank
# 'sys[R] finished, T cycles, exposed communication X cycles' (1 cycle = 1 ns) and exits 0
# even when a rank never finishes; this script exits {UNFINISHED_EXIT} then, naming the ranks.
set -uo pipefail
ASTRA_SIM_BIN=${{ASTRA_SIM_BIN:-{binary}}}
RANKS={ranks}
case $ASTRA_SIM_BIN in
  /*) ;;
  */*) ASTRA_SIM_BIN=$PWD/$ASTRA_SIM_BIN ;;
esac
if [ -n "${{ASTRA_SIM_LOG_DIR:-}}" ]; then
  logs=$ASTRA_SIM_LOG_DIR
  case $logs in /*) ;; *) logs=$PWD/$logs ;; esac
  if [ -e "$logs/log.log" ] || [ -e "$logs/err.log" ]; then
    printf 'run.sh: ASTRA_SIM_LOG_DIR %q holds an earlier run'"'"'s logs' "$logs" >&2
    echo ' (ASTRA-sim appends to them): name a new folder or remove them' >&2
    exit 2
  fi
  mkdir -p -- "$logs" || exit 2
else
  logs=$(mktemp -d "${{TMPDIR:-/tmp}}/astra-sim-log.XXXXXX") || exit 1
fi
here=.
case $0 in */*) here=${{0%/*}} ;; esac
case $here in /*) ;; '') here=/ ;; *) here=./$here ;; esac
cd -- "$here" || exit 1
out=$(mktemp) || exit 1
copy=
trap 'rm -rf -- "$out" ${{copy:+"$copy"}}' EXIT
if [ ! -w {first}.0.et ]; then
  # ASTRA-sim opens each ET in append mode ("a+"), which a read-only file refuses
  copy=$(mktemp -d "${{TMPDIR:-/tmp}}/astra-sim-bundle.XXXXXX") || exit 1
  mkdir -- "$copy/{WORKLOAD_DIR}" && cp -- {first}.*.et "$copy/{WORKLOAD_DIR}/" \\
    && cp -- system.json network.yml memory.json comm_group.json "$copy/" && cd -- "$copy" \\
    || exit 1
  echo "run.sh: the bundle is read-only; running a temporary copy of it" >&2
fi
"$ASTRA_SIM_BIN" \\
  {args} \\
  --logging-folder "$logs" \\
  "$@" 2>&1 | tee -- "$out"
status=${{PIPESTATUS[0]}}
printf 'run.sh: ASTRA-sim logs in %q\n' "$logs" >&2
if [ "$status" -ne 0 ]; then
  echo "run.sh: ASTRA-sim exited with status $status" >&2
  exit "$status"
fi
missing=()
for ((r = 0; r < RANKS; r++)); do
  grep -q "sys\\[$r\\] finished, " "$out" || missing+=("$r")
done
if [ "${{#missing[@]}}" -ne 0 ]; then
  echo "run.sh: ${{#missing[@]}} of $RANKS ranks never finished (ranks ${{missing[*]}})" >&2
  exit {UNFINISHED_EXIT}
fi
step=$(grep -oE 'sys\\[[0-9]+\\] finished, [0-9]+ cycles' "$out" \\
  | sed -E 's/.* finished, ([0-9]+) cycles/\\1/' | sort -n | tail -n 1)
echo "run.sh: all $RANKS ranks finished; step time $step ns (slowest rank)"
"""
