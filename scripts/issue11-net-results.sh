#!/usr/bin/env bash
# The table of the issue-11 network-fault scenarios in docs/results.md, read by jq from the committed runs'
# summary.json and expectations.json (docs/results/issue11/<scenario>[-seed<N>]/): nothing is typed by hand.
#
#   scripts/issue11-net-results.sh          print the table from the committed summaries
#   scripts/issue11-net-results.sh --run    run each scenario first, as root, with every node in its own network
#                                           namespace (--netns): partition-bac-pcscf with seeds 42, 43 and 44,
#                                           loss-pcscf and wan-latency with seed 42 (about 7 minutes), and copy the summaries
#   scripts/issue11-net-results.sh --run compose/wan-latency:42 …   run only those (scenario:seed, as in runs below)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=docs/results/issue11
runs=(partition-bac-pcscf:42 partition-bac-pcscf:43 partition-bac-pcscf:44 loss-pcscf:42 wan-latency:42 compose/loss-pcscf:42 compose/wan-latency:42
  compose/partition-bac-pcscf:42)   # compose/…: the compose backend (Docker), the rest --netns
if [[ "${1:-}" == "--run" ]]; then
  shift
  todo=("${runs[@]}")
  [[ $# -gt 0 ]] && todo=("$@") # --run compose/wan-latency:42 …: only those
  go build -o runs/imslab-net ./cmd/imslab
  for r in "${todo[@]}"; do
    s=${r%%:*} seed=${r##*:}
    name=${s#compose/} backend=(--netns) out="runs/issue11-${s//\//-}-seed$seed"
    [[ "$s" == compose/* ]] && backend=(--backend compose)
    rm -rf "$out" # a run directory is appended to: start from nothing
    err=$(runs/imslab-net run "scenarios/$name.yaml" "${backend[@]}" --seed "$seed" --out "$out" 2>&1 >/dev/null) || true
    rm -rf "${dir:?}/$s-seed$seed" && mkdir -p "$dir/$s-seed$seed"
    if [[ -f "$out/summary.json" ]]; then
      cp "$out/summary.json" "$out/expectations.json" "$dir/$s-seed$seed/"
    else # the run did not finish: its error, not an older run's figures
      printf '%s\n' "$err" | head -n 1 > "$dir/$s-seed$seed/error.txt"
    fi
  done
fi
echo "| scenario (seed) | fault (instant, heal) | affected users | calls during the fault: answered in it / all | after the heal: answered / all | all calls: answered / all | MO / MT affected users served before re-registration | interruption p50 / p95 / max MO, MT (s) | time to detect (s) | expectations held |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for r in "${runs[@]}"; do
  s=${r%%:*} seed=${r##*:}
  if [[ -f "$dir/$s-seed$seed/error.txt" ]]; then
    echo "| $s ($seed) | the run did not finish: $(cat "$dir/$s-seed$seed/error.txt") |||||||||"
    continue
  fi
  jq -r -n --slurpfile m "$dir/$s-seed$seed/summary.json" --slurpfile e "$dir/$s-seed$seed/expectations.json" \
    --arg s "$s ($seed)" '
    def r: if . == null then "–" else ((. * 100 | round) / 100 | tostring) end;
    def w(x): if x == null then "–" else "\(x.answered_in_window // x.answered) / \(x.calls)" end;
    def wa(x): if x == null then "–" else "\(x.answered) / \(x.calls)" end;
    $m[0] as $m | $e[0] as $e | $m.faults[0] as $f |
    "| \($s) | \($f.kind) \($f.target)" + (if $f.params then " (\($f.params))" else "" end) + " at \($f.t0_s | r) s" +
    (if $f.heal_s then ", healed \($f.heal_s | r) s" else "" end) +
    " | \($m.affected_users) | \(w($f.during)) | \(wa($f.after_heal)) | \($m.calls.answered) / \($m.calls.total) " +
    "| \($m.mo.affected_users_with_success) / \($m.mt.affected_users_with_success) " +
    "| \($m.mo.interruption_s.p50 | r) / \($m.mo.interruption_s.p95 | r) / \($m.mo.interruption_s.max | r), " +
    "\($m.mt.interruption_s.p50 | r) / \($m.mt.interruption_s.p95 | r) / \($m.mt.interruption_s.max | r) " +
    "| " + ([$m.faults[] | .time_to_detect_s | to_entries[] | "\(.key) \(.value | r)"] | unique_by(split(" ")[0]) | join(", ") | if . == "" then "none" else . end) +
    " | \([$e.results[] | select(.ok)] | length) / \($e.results | length)" +
    (if $e.passed then "" else " (failed: " + ([$e.results[] | select(.ok | not) | .name] | join("; ")) + ")" end) + " |"'
done
