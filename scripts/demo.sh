#!/usr/bin/env bash
# The main job on the bundled example: a matched host-ET + Kineto capture of a tiny GPT
# trained with DDP on 2 CPU ranks (tests/data/captures/ddp, see its SOURCES.md).
# convert -> inspect -> simulate (replay, with timeline) -> compare -> export to ASTRA-sim.
set -euo pipefail
LUMOS=${1:-lumos}
OUT=${2:-out/demo}
root=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$OUT" && mkdir -p "$OUT"
set -x
"$LUMOS" convert "$root/tests/data/captures/ddp" -o "$OUT/et" --prefix ddp
"$LUMOS" et validate "$OUT/et"
"$LUMOS" et info "$OUT/et"
"$LUMOS" simulate "$OUT/et" --timeline "$OUT/timeline.json" --json > "$OUT/simulate.json"
"$LUMOS" simulate "$OUT/et"
"$LUMOS" compare "$OUT/et"
"$LUMOS" simulate "$OUT/et" --hw h100 --mode model
"$LUMOS" export astra-sim "$OUT/et" -o "$OUT/astra-sim" --hw h100
set +x
echo
echo "outputs in $OUT: et/ (Chakra ETs), timeline.json (open in https://ui.perfetto.dev),"
echo "simulate.json (machine-readable report), astra-sim/ (bundle; run.sh runs ASTRA-sim)"
