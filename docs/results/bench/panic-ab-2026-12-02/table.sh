#!/usr/bin/env bash
# The table of README.md, from the committed summaries and event extracts: scripts here, figures not typed.
cd "$(dirname "$0")"
echo "| run | calls | answered | failed | answered/s | setup p95 to 200 (ms) | peer_state events | requests routed in panic |"
echo "|---|---|---|---|---|---|---|---|"
for r in on-1 off-1 on-2 off-2; do
  jq -r --arg r "$r" --argjson pe "$(grep -c peer_state "$r/peer-and-panic-events.jsonl")" \
    --argjson pp "$(jq -s 'map(select(.kind=="pool_panic") | .requests) | add // 0' "$r/peer-and-panic-events.jsonl")" \
    '"| \($r) | \(.calls.total) | \(.calls.answered) | \(.calls.failed) | \(.calls.answered / .duration_s * 10 | round / 10) | \(.setup_latency_ms.normal.p95 | round) | \($pe) | \($pp) |"' "$r/summary.json"
done
