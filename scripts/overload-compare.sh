#!/usr/bin/env bash
# The BAC's chain cap against no chain signal, from two committed benches (docs/performance.md, "Overload,
# measured"): prints a Markdown table of answered calls/s and registrations/s per step, with n and the causes.
# Usage: scripts/overload-compare.sh [dir]   (a dir with cap/ and nochain/; default docs/results/bench/overload-2026-12-01/f240e19)
set -euo pipefail
dir=${1:-docs/results/bench/overload-2026-12-01/f240e19}
for v in nochain cap; do
  jq -r --arg v "$v" '
    (.provenance.commit // .provenance.Commit // "?") as $c |
    (.capacity[] | [$v, "calls", (.call_rate_asked|tostring), (.calls|tostring), (.answered_per_s*10|round/10|tostring),
      ((.failure_share*1000|round)/10|tostring), (.setup_180_p95_ms|round|tostring), (.by_cause // {}|to_entries|map("\(.key) \(.value)")|join(", ")|if . == "" then "none" else . end),
      (.run_dir|split("/")|last)]),
    (.registration[] | [$v, "registrations", (.register_rate_asked|tostring), (.attempts|tostring),
      (.registrations_per_s*10|round/10|tostring), ((.failure_share*1000|round)/10|tostring), (.p95_ms|round|tostring),
      (.by_cause // {}|to_entries|map("\(.key) \(.value)")|join(", ")|if . == "" then "none" else . end), (.run_dir|split("/")|last)])
    | @tsv' "$dir/$v/bench.json" | while IFS=$'\t' read -r -a f; do
      # peer_state events of every node in the step: a live member marked down (and up again) under load
      n=$(wc -l < "$dir/$v/${f[8]}/peer-state.jsonl")
      printf '%s\t' "${f[@]:0:8}"; printf '%s\n' "$n"
    done
done | sort -t$'\t' -k2,2 -k3,3n -k1,1r | awk -F'\t' 'BEGIN {
    print "| kind | rate asked (/s) | BAC chain signal | n (attempts) | answered or registered /s | failed % | p95 (ms) | failures by cause | peer_state events |"
    print "|---|---|---|---|---|---|---|---|---|" }
  { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $2, $3, ($1 == "cap" ? "cap (default)" : "off (chain_target -1)"), $4, $5, $6, $7, $8, $9 }'
