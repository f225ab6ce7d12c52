#!/usr/bin/env bash
# The table of run.sh's runs: per run, its calls answered (before the kill, after it), the expectations held, and
# the mean CPU (% of one CPU, from top's 5 s samples from 5 s after t0 to the end of the traffic) of
# each process kind; the machine has 2 CPUs (200 %).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
echo "| run | backend | phones | calls answered / all: before the kill (0–20 s), after it (20–60 s) | expectations held | CPU %: imslab (runner, phones, delay lines), S-CSCFs, P-CSCFs, BAC, I-CSCF, HSS, docker engine + shims, all |"
echo "|---|---|---|---|---|---|"
for dir in "$here"/runs/*/; do
  dir=${dir%/} run=$(basename "$dir")
  [[ -f "$dir/summary.json" ]] || { echo "| $run | | | did not finish: $(tail -n 1 "$dir/run.log") | | |"; continue; }
  backend=${run%%-*} phones=$(echo "$run" | cut -d- -f2)
  calls=$(awk '{if ($1<20) {a+=$2; n+=$3} else {b+=$2; m+=$3}} END{printf "%d / %d, %d / %d", a, n, b, m}' "$dir/outcomes.txt")
  held=$(jq -r '"\([.results[] | select(.ok)] | length) / \(.results | length)"' "$dir/expectations.json")
  t0=$(jq -r '.start_ns / 1e9 | floor' "$dir/summary.json") dur=$(jq -r '.duration_s | floor' "$dir/summary.json")
  day=$(date -u -d "@$t0" +%F)
  cpu=$(awk -v t0="$t0" -v dur="$dur" -v day="$day" '
    /^top -/{ cmd = "date -u -d \"" day " " $3 "\" +%s"; cmd | getline ts; close(cmd); on = (ts >= t0 + 5 && ts <= t0 + dur); if (on) s++ }
    /^ *[0-9]+ / && on { k[$12] += $9 }
    END{ if (!s) s = 1; d=(k["dockerd"]+k["containerd-shim"]+k["containerd"])/s; t=0; for (x in k) t+=k[x]/s;
      printf "%.0f, %.0f, %.0f, %.0f, %.0f, %.0f, %.0f, %.0f (%d samples)", k["imslab"]/s, k["scscf"]/s, k["pcscf"]/s, k["bac"]/s, k["icscf"]/s, k["hss"]/s, d, t, s }' "$dir/top.txt")
  echo "| $run | $backend | $phones | $calls | $held | $cpu |"
done
