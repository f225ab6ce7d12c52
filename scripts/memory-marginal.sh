#!/usr/bin/env bash
# From two memory points at the same registration rate (scripts/memory-point.sh), the nodes' memory per extra
# registered phone and a straight-line extrapolation to --to phones; the registration burst's transactions cost
# the same in both runs, so the difference is the population's own cost. Reads the committed JSON with jq.
#
#   scripts/memory-marginal.sh docs/results/memory/memory-10000.json docs/results/memory/memory-30000.json [--to 100000]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 small.json large.json [--to 100000]" >&2; exit 2; }
a=$1 b=$2 to=100000
[ "${3:-}" = "--to" ] && to=$4
jq -r -n --slurpfile a "$a" --slurpfile b "$b" --argjson to "$to" '
  def mb: . / 1e6 | . * 10 | round / 10;
  ($a[0]) as $a | ($b[0]) as $b |
  ($b.registered_at_end - $a.registered_at_end) as $dn |
  (["figure", "\($a.registered_at_end) phones", "\($b.registered_at_end) phones", "per extra phone (bytes)", "at \($to) phones (extrapolated, MB)"],
  (["nodes_peak_rss_bytes", "nodes_last_rss_bytes"][] as $k |
    (($b[$k] - $a[$k]) / $dn) as $per |
    [$k, ($a[$k] | mb), ($b[$k] | mb), ($per | round), (($b[$k] + $per * ($to - $b.registered_at_end)) | mb)]),
  (($b.phones_process.peak_rss_bytes - $a.phones_process.peak_rss_bytes) / $dn) as $per |
    ["phones_process.peak_rss_bytes", ($a.phones_process.peak_rss_bytes | mb), ($b.phones_process.peak_rss_bytes | mb),
     ($per | round), (($b.phones_process.peak_rss_bytes + $per * ($to - $b.registered_at_end)) | mb)])
  | @tsv' | column -t -s $'\t'
