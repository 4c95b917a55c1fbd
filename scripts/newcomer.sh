#!/usr/bin/env bash
# A newcomer's first hour, scripted: a fresh venv, the wheel installed outside the
# repository, every command on the bundled 2-rank capture, then every common mistake.
# Each mistake must be answered by one `error:` line (or a usage line) and a non-zero
# exit code, never a traceback; the script fails otherwise.
#
#   bash scripts/newcomer.sh [WORKDIR]      # transcript on stdout (docs/newcomer.md holds one)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/lumos-newcomer.XXXXXX)}
mkdir -p "$work"
capture="$root/tests/data/captures/ddp"
py=${PYTHON:-python3}
failures=0

say() { printf '\n## %s\n' "$*"; }
# the transcript names files relative to the work folder and the clone
tidy() { sed -e "s|$work/venv/bin/||g" -e "s|$work/||g" -e "s|$root/||g"; }
# run CMD...: show it, its output, its exit code
run() {
  printf '$ %s\n' "$*" | tidy
  "$@" 2>&1 | tidy
  local rc=${PIPESTATUS[0]}
  printf '[exit %d]\n' "$rc"
  return "$rc"
}
# ok CMD...: must succeed
ok() {
  if ! run "$@"; then
    echo "NEWCOMER FAIL: expected success"
    failures=$((failures + 1))
  fi
}
# mistake CMD...: must fail with a clear message and no traceback
mistake() {
  local out rc
  printf '$ %s\n' "$*" | tidy
  out=$("$@" 2>&1)
  rc=$?
  printf '%s\n' "$out" | tidy
  printf '[exit %d]\n' "$rc"
  if [ "$rc" -eq 0 ] || grep -q Traceback <<<"$out" || ! grep -q '^error: \|^Error: ' <<<"$out"; then
    echo "NEWCOMER FAIL: expected one clear error and a non-zero exit"
    failures=$((failures + 1))
  fi
}

say "install: a fresh venv, the wheel built from the clone, run from another folder"
(
  cd "$work" || exit 1
  "$py" -m venv venv >/dev/null
  venv/bin/pip install -q --upgrade pip >/dev/null 2>&1
  venv/bin/pip wheel -q --no-deps -w dist "$root" >/dev/null 2>&1
  venv/bin/pip install -q dist/lumos-*.whl >/dev/null 2>&1
) || { echo "NEWCOMER FAIL: install"; exit 1; }
lumos="$work/venv/bin/lumos"
venv_python="$work/venv/bin/python"
cd "$work" || exit 1
echo "installed: $(ls dist) into venv/ ; lumos from $(venv/bin/python -c 'import lumos, os; print(os.path.dirname(lumos.__file__))' | sed "s|$work/||")"

say "every command on the bundled capture ($(basename "$capture"): 2 ranks, host ET + Kineto each)"
ok "$lumos" --version
ok "$lumos" --help
ok "$lumos" hw list
ok "$lumos" convert "$capture" -o ets
ok "$lumos" et info ets
ok "$lumos" et validate ets
ok "$lumos" simulate ets --timeline step.json --plot step
ok "$lumos" compare ets
ok "$lumos" simulate ets --hw H100 -q
ok "$lumos" simulate ets --hw a100
ok "$lumos" export astra-sim ets -o bundle --hw h100
ok "$lumos" export astra-sim-check bundle
ok "$lumos" et to-json ets/trace.0.et -o rank0.jsonl
printf '$ lumos simulate ets --json | head -c 300\n'
"$lumos" simulate ets --json | head -c 300
printf '\n'
ok "$lumos" estimate --model llama2-7b --tp 2 --dp 2
ok "$lumos" whatif ets --slow-rank 1=1.5
ok "$lumos" hw show v100
ok "$venv_python" -c "import lumos; s = lumos.simulate('ets'); print(s.step_ns, s.report.slowest_rank)"

say "a host ET alone converts, but carries no durations"
ok "$lumos" convert "$capture/rank0.host_et.json.gz" -o host-only
mistake "$lumos" simulate host-only
ok "$lumos" simulate host-only --hw h100 -q

say "common mistakes: each one clear line, no traceback"
mistake "$lumos" convert ets/trace.0.et -o again            # convert on .et files
mistake "$lumos" convert ets -o again                       # a folder of .et files
mistake "$lumos" simulate "$capture"                         # simulate on raw traces
mistake "$lumos" simulate "$capture/rank0.kineto.json.gz"   # one raw trace
mistake "$lumos" simulate ets --hw h200                     # wrong --hw
mistake "$lumos" simulate ets --timeline no/such/folder/t.json   # missing output folder
mistake "$lumos" simulate ets --timeline step.json          # output exists, no --force
mistake "$lumos" convert "$capture" -o ets                  # ETs exist, no --force
mistake "$lumos" convert does-not-exist -o x                # a typo in the input
mkdir -p mixed
cp "$capture"/rank*.host_et.json.gz mixed/
cp "$root"/tests/data/captures/fsdp/rank*.kineto.json.gz mixed/
mistake "$lumos" convert mixed -o mixed-ets                 # host ETs and Kineto of different runs

printf '\n%s\n' "newcomer walk: $failures failure(s)"
[ "$failures" -eq 0 ]
