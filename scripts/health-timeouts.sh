#!/usr/bin/env bash
# The table of docs/results/health-timeouts/README.md, from its committed data: one compose pcscf-kill run
# (60 s, seed drawn) before and one after the passive-detection fix (commit dd556eb).
set -euo pipefail
cd "$(dirname "$0")/../docs/results/health-timeouts"
echo "| run | peer_state events | of which reason timeout | MO / MT success after detection | expectations held |"
echo "|---|---|---|---|---|"
for r in before after; do
  n=$(wc -l < "$r/peer_state.jsonl")
  t=$(grep -c '"reason":"timeout"' "$r/peer_state.jsonl" || true)
  s=$(jq -r '"\(.mo.success_ratio_after_detection) / \(.mt.success_ratio_after_detection)"' "$r/summary.json")
  e=$(jq -r '"\([.results[] | select(.ok)] | length) / \(.results | length)"' "$r/expectations.json")
  echo "| $r | $n | $t | $s | $e |"
done
