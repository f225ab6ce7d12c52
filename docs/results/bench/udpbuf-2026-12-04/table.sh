#!/usr/bin/env bash
# Prints the table of run.sh's runs: per run, the datagrams the kernel dropped (udp_drops events, by node), the
# share of affected users restored by detection + one probe interval, the users restored after that bound and the
# latest restoration, the seconds in which a node ran late (self_lag).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
echo "| run | buffers | seed | victim | affected users | datagrams dropped (by node) | restored by the bound | users restored after the bound | latest restore (s) | self_lag events |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for dir in "$here"/runs/*/; do
  dir=${dir%/}
  run=$(basename "$dir")
  [ -f "$dir/summary.json" ] || { echo "| $run | | | | | no summary.json | | | | |"; continue; }
  setting=${run%-*}
  bufs="4 MiB"; [ "$setting" = default ] && bufs="kernel default"
  drops=$(jq -s -r 'map(select(.kind=="udp_drops")) | group_by(.node) | map("\(.[0].node) \(map(.drops) | add)") | join(", ")' "$dir/events-kept.jsonl")
  total=$(jq -s -r 'map(select(.kind=="udp_drops") | .drops) | add // 0' "$dir/events-kept.jsonl")
  lag=$(jq -s -r 'map(select(.kind=="self_lag")) | length' "$dir/events-kept.jsonl")
  bound=$(jq -r '.survival.bound_s' "$dir/summary.json")
  late=$(awk -F, -v b="$bound" 'NR==1{for(i=1;i<=NF;i++)c[$i]=i;next} $c["restore_s"]=="" || $c["restore_s"]+0>b+0 {n++} END{print n+0}' "$dir/users.csv")
  latest=$(awk -F, 'NR==1{for(i=1;i<=NF;i++)c[$i]=i;next} $c["restore_s"]!="" && $c["restore_s"]+0>m {m=$c["restore_s"]+0} END{printf "%.2f", m}' "$dir/users.csv")
  jq -r --arg run "$run" --arg bufs "$bufs" --arg drops "${total}${drops:+ ($drops)}" --arg late "$late" \
    --arg latest "$latest" --arg lag "$lag" \
    '"| \($run) | \($bufs) | \(.seed) | \(.faults[0].target) | \(.affected_users) | \($drops) | \(.survival.restored_at_bound) | \($late) | \($latest) | \($lag) |"' "$dir/summary.json"
done
