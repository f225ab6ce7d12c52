#!/usr/bin/env bash
# The nodes' and phones' socket receive buffers sized (4 MiB, the default since commit a6ac3fa) against the
# kernel's default (IMSLAB_UDP_RCVBUF=0, as every run before that commit), on the published study's pcscf-kill
# experiment (pcscf-kill.yaml: scenarios/realistic-pcscf-kill.yaml with the study's fault, a random P-CSCF killed
# at a random instant in [20, 21) s), quasi-pool, seeds 120001… (those of the study's repetitions). The two
# settings of a pair run at the same time, each lab pinned to its own CPU (as the study's runs are pinned) on its
# own ports, and swap CPUs from one pair to the next, so that neither setting gets the quieter CPU.
#
#   BIN=/path/to/prebuilt/binaries docs/results/bench/udpbuf-2026-12-04/run.sh [pairs]
#
# Each run keeps summary.json, users.csv and the udp_drops, self_lag, fault and peer_state events
# (runs/<setting>-<k>/); table.sh prints the table from them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pairs=${1:-5}
: "${BIN:?BIN: a directory with imslab and the node binaries}"
mkdir -p "$here/runs"
one() { # setting k seed cpu offset
  local setting=$1 k=$2 seed=$3 cpu=$4 offset=$5
  local dir="$here/runs/$setting-$k"
  rm -rf "$dir"
  local env=(IMSLAB_UDP_RCVBUF=4194304)
  [ "$setting" = default ] && env=(IMSLAB_UDP_RCVBUF=0)
  env "${env[@]}" taskset -c "$cpu" "$BIN/imslab" run "$here/pcscf-kill.yaml" --seed "$seed" --bin-dir "$BIN" \
    --port-offset "$offset" --out "$dir" >"$dir.log" 2>&1 || true
  # Keep what the table reads; the rest (traces, per-node logs) is large and regenerable with the seed.
  if [ -d "$dir" ]; then
    grep -h '"kind":"\(udp_drops\|self_lag\|fault\|peer_state\)"' "$dir/events.jsonl" >"$dir/events-kept.jsonl" || true
    find "$dir" -mindepth 1 -maxdepth 1 ! -name summary.json ! -name users.csv ! -name events-kept.jsonl \
      ! -name expectations.json -exec rm -rf {} +
  fi
}
for k in $(seq 1 "$pairs"); do
  seed=$((120000 + k))
  a=$(( (k + 1) % 2 )) b=$(( k % 2 ))
  echo "== pair $k, seed $seed: sized on CPU $a, default on CPU $b"
  one sized "$k" "$seed" "$a" 20000 &
  one default "$k" "$seed" "$b" 30000 &
  wait
done
"$here/table.sh"
