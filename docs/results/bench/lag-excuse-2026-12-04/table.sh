#!/usr/bin/env bash
# The table of README.md from the committed summaries and event extracts (nothing typed).
cd "$(dirname "$0")"
echo "| run | excuse | calls | answered | failed (by cause) | answered in 20-30 s / attempts | answered in 30-40 s / attempts | peers marked down | self_lag events |"
echo "|---|---|---|---|---|---|---|---|---|"
for r in runs/*; do
  n=$(basename "$r"); v=${n%-*}
  down=$(jq -s 'map(select(.kind=="peer_state" and .state=="down")) | length' "$r/events.jsonl")
  lag=$(jq -s 'map(select(.kind=="self_lag")) | length' "$r/events.jsonl")
  jq -r --arg n "$n" --arg v "$v" --argjson down "$down" --argjson lag "$lag" '
    def win(a; b): [.bins[] | select(.start_s >= a and .start_s < b)] |
      "\(map(.affected_succeeded + .others_succeeded) | add) / \(map(.affected_attempts + .others_attempts) | add)";
    "| \($n) | \($v) | \(.calls.total) | \(.calls.answered) | \(.calls.failed) (\(.calls.by_cause | to_entries | map("\(.key) \(.value)") | join(", "))) | \(win(20; 30)) | \(win(30; 40)) | \($down) | \($lag) |"' "$r/summary.json"
done
