#!/usr/bin/env bash
# The shipped wan-latency scenario on the compose backend at its full load (40 phones) and at half of it (20 phones,
# the same call rate and probe calls per phone), K runs of each, alternating, seed 42, with every process's CPU
# sampled by top every 5 s; and, for the CPU comparison, the full load on the namespace backend (--netns) once.
#
#   BIN=/path/to/prebuilt/binaries docs/results/issue11/compose/wan-latency-load/run.sh [K]
#
# Keeps each run's summary.json, expectations.json and the calls' outcomes per 5 s (runs/<label>-<k>/); cpu.sh
# prints the CPU table from the top samples, table.sh the outcomes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../../.." && pwd)
k=${1:-3}
: "${BIN:?BIN: a directory with imslab and the node binaries}"
mkdir -p "$here/runs"
one() { # label phones backend-flags...
  local label=$1 phones=$2; shift 2
  local dir="$here/runs/$label" tmp; tmp=$(mktemp -d)
  sed "s/phones: 40,/phones: $phones,/" "$root/scenarios/wan-latency.yaml" >"$tmp/wan-latency.yaml"
  grep -q "phones: $phones," "$tmp/wan-latency.yaml"
  rm -rf "$dir" && mkdir -p "$dir"
  top -b -d 5 -n 30 -w 200 >"$dir/top.txt" &
  local top=$!
  "$BIN/imslab" run "$tmp/wan-latency.yaml" "$@" --bin-dir "$BIN" --seed 42 --out "$tmp/run" >"$dir/run.log" 2>&1 || true
  kill "$top" 2>/dev/null || true
  wait "$top" 2>/dev/null || true
  if [[ -f "$tmp/run/summary.json" ]]; then
    cp "$tmp/run/summary.json" "$tmp/run/expectations.json" "$dir/"
    # calls per 5 s of start time: answered / all
    awk -F, 'NR>1{b=int($5/5)*5; n[b]++; if ($6=="ok") ok[b]++} END{for (b in n) printf "%d %d %d\n", b, ok[b]+0, n[b]}' \
      "$tmp/run/calls.csv" | sort -n >"$dir/outcomes.txt"
  fi
  rm -rf "$tmp"
}
for i in $(seq 1 "$k"); do
  one "compose-40-$i" 40 --backend compose
  one "compose-20-$i" 20 --backend compose
done
one netns-40-1 40 --netns
"$here/table.sh"
