#!/usr/bin/env bash
# The BAC's chain cap against no chain signal, from two committed benches (docs/performance.md, "Overload,
# measured"): prints a Markdown table of answered calls/s and registrations/s per step, with n and the causes.
# Usage: scripts/overload-compare.sh [dir]   (default docs/results/bench/overload-2026-12-01: cap/ and nochain/)
set -euo pipefail
dir=${1:-docs/results/bench/overload-2026-12-01}
for v in nochain cap; do
  jq -r --arg v "$v" '
    (.provenance.commit // .provenance.Commit // "?") as $c |
    (.capacity[] | [$v, "calls", (.call_rate_asked|tostring), (.calls|tostring), (.answered_per_s*10|round/10|tostring),
      ((.failure_share*1000|round)/10|tostring), (.setup_180_p95_ms|round|tostring), (.by_cause|to_entries|map("\(.key) \(.value)")|join(", "))]),
    (.registration[] | [$v, "registrations", (.register_rate_asked|tostring), (.attempts|tostring),
      (.registrations_per_s*10|round/10|tostring), ((.failure_share*1000|round)/10|tostring), (.p95_ms|round|tostring),
      (.by_cause // {}|to_entries|map("\(.key) \(.value)")|join(", "))])
    | @tsv' "$dir/$v/bench.json"
done | sort -t$'\t' -k2,2 -k3,3n -k1,1r | awk -F'\t' 'BEGIN {
    print "| kind | rate asked (/s) | BAC chain signal | n (attempts) | answered or registered /s | failed % | p95 (ms) | failures by cause |"
    print "|---|---|---|---|---|---|---|---|" }
  { printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $2, $3, ($1 == "cap" ? "cap (default)" : "off (chain_target -1)"), $4, $5, $6, $7, $8 }'
