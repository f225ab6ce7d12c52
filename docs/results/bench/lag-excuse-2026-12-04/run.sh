#!/bin/bash
# Interleaved A/B of the lag excuse with every node starved (starved-on.yaml, starved-off.yaml), seeds 21..23.
# Each run directory is pruned to what table.sh reads (summary.json, the peer_state and self_lag events).
set -u
cd "$(dirname "$0")"
bin=${BIN:?prebuilt binaries of the commit under test (go build -o \$BIN/ ./cmd/...)}
for k in 1 2 3; do
  for v in on off; do
    out=runs/$v-$k
    rm -rf "$out" "/tmp/lagab-$v-$k"
    echo "== $v $k $(date -u +%H:%M:%S)"
    "$bin/imslab" run "starved-$v.yaml" --seed $((20+k)) --keep-going --bin-dir "$bin" --out "/tmp/lagab-$v-$k" > "/tmp/lagab-$v-$k.log" 2>&1
    echo "exit $?"
    mkdir -p "$out"
    cp "/tmp/lagab-$v-$k/summary.json" "$out/"
    jq -c 'select(.kind=="peer_state" or .kind=="self_lag" or .kind=="fault" or .kind=="fault_heal")' "/tmp/lagab-$v-$k/events.jsonl" > "$out/events.jsonl"
  done
done
