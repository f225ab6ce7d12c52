#!/usr/bin/env bash
# Compares settings of the whole lab on the full chain: runs one capacity step of `imslab bench` (the default lab,
# phones placing Poisson calls through the 7 proxy hops) per setting and repetition, the settings interleaved
# (A B C A B C …) so that load coming and going on the machine hits each of them, and writes a table of the
# nodes' CPU milliseconds per answered call (from the lab's per-node resource samples: bench.json
# nodes_cpu_ms_per_call), the answered rate, the failed share and the setup p95, with the median and the range
# over the repetitions per setting.
#
#   scripts/capacity-ab.sh [--rate 120] [--duration 20s] [--repeat 3] [--out DIR] [--bin-dir DIR] NAME=ENV[,ENV…] …
#   scripts/capacity-ab.sh --repeat 3 default= gomaxprocs1=GOMAXPROCS=1 gogc200=GOGC=200
#
# A setting is a name and the environment given to imslab, which the lab's nodes inherit (GOMAXPROCS, GOGC,
# GOMEMLIMIT, …; empty = as it is). Output: DIR/<name>-<k>/bench.json and bench.md of each step, DIR/table.md.
# The steps' run directories are removed (their bench.json keeps the figures); the table is imslab table capacity-ab.
set -euo pipefail
cd "$(dirname "$0")/.."
rate=120 duration=20s repeat=3 out="runs/capacity-ab-$(date -u +%Y%m%d-%H%M%S)" bindir=""
settings=()
while [ $# -gt 0 ]; do
  case $1 in
    --rate) rate=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --bin-dir) bindir=$2; shift 2 ;;
    *=*) settings+=("$1"); shift ;;
    *) echo "usage: $0 [--rate 120] [--duration 20s] [--repeat 3] [--out DIR] [--bin-dir DIR] NAME=ENV[,ENV…] …" >&2; exit 2 ;;
  esac
done
[ ${#settings[@]} -gt 0 ] || { echo "$0: name at least one setting (default= for the lab as it is)" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
go build -o "$out/imslab" ./cmd/imslab
if [ -z "$bindir" ]; then
  bindir="$out/bin"
  mkdir -p "$bindir"
  for c in dnsd hss bac pcscf icscf scscf; do go build -o "$bindir/$c" "./cmd/$c"; done
fi
for k in $(seq 1 "$repeat"); do
  for s in "${settings[@]}"; do
    name=${s%%=*} envs=${s#*=}
    dir="$out/$name-$k"
    rm -rf "$dir"
    IFS=, read -r -a kv <<<"$envs"
    echo "== $name ($envs) repetition $k"
    env "${kv[@]}" "$out/imslab" bench --kinds capacity --call-rates "$rate" --call-duration "$duration" \
      --bin-dir "$bindir" --out "$dir" >"$dir.log" 2>&1 || true
    find "$dir" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
    "$out/imslab" table capacity-step "$dir" 2>/dev/null || echo "   no bench.json (see $dir.log)"
  done
done
{
  echo "\`scripts/capacity-ab.sh --rate $rate --duration $duration --repeat $repeat ${settings[*]}\`, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!runs' || echo ' (dirty)')"
  echo
  "$out/imslab" table capacity-ab --out "$out" "${settings[@]}"
} >"$out/table.md"
rm -f "$out/imslab"
cat "$out/table.md"
