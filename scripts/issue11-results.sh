#!/usr/bin/env bash
# The table of the issue-11 process-fault scenarios in docs/results.md, read by jq from the committed runs'
# summary.json and expectations.json (docs/results/issue11/<scenario>/): nothing is typed by hand.
#
#   scripts/issue11-results.sh              print the table from the committed summaries
#   scripts/issue11-results.sh --run        run each scenario first (seed 42, local backend, as root for
#                                           gray-pcscf; compose/<name>: the compose backend, Docker; about 20
#                                           minutes) and commit-ready copy its summary
#   scripts/issue11-results.sh --run compose/site-loss …   run only those
set -euo pipefail
cd "$(dirname "$0")/.."
dir=docs/results/issue11
scenarios=(hss-outage failback-pcscf failback-scscf-stale dns-outage site-loss flapping-scscf gray-pcscf
  compose/hss-outage compose/site-loss compose/gray-pcscf compose/failback-pcscf compose/dns-outage
  compose/flapping-scscf)
if [[ "${1:-}" == "--run" ]]; then
  shift
  todo=("${scenarios[@]}")
  [[ $# -gt 0 ]] && todo=("$@") # --run compose/site-loss …: only those
  go build -o runs/imslab-proc ./cmd/imslab
  for s in "${todo[@]}"; do
    name=${s#compose/} backend=() out="runs/issue11-${s//\//-}"
    [[ "$s" == compose/* ]] && backend=(--backend compose)
    rm -rf "$out" # a run directory is appended to: start from nothing
    err=$(runs/imslab-proc run "scenarios/$name.yaml" "${backend[@]}" --seed 42 --out "$out" 2>&1 >/dev/null) || true
    rm -rf "${dir:?}/$s" && mkdir -p "$dir/$s"
    if [[ -f "$out/summary.json" ]]; then
      cp "$out/summary.json" "$out/expectations.json" "$dir/$s/"
    else # the run did not finish: its error, not an older run's figures
      printf '%s\n' "$err" | head -n 1 > "$dir/$s/error.txt"
    fi
  done
fi
echo "| scenario | fault (instant, heal) | affected users | calls during the fault: answered in it / all | after the heal: answered / all | MO / MT affected users served before re-registration | interruption p50 / max MO, MT (s) | time to detect (s) | expectations held |"
echo "|---|---|---|---|---|---|---|---|---|"
for s in "${scenarios[@]}"; do
  if [[ -f "$dir/$s/error.txt" ]]; then
    echo "| $s | the run did not finish: $(cat "$dir/$s/error.txt") ||||||||"
    continue
  fi
  jq -r -n --slurpfile m "$dir/$s/summary.json" --slurpfile e "$dir/$s/expectations.json" --arg s "$s" '
    def r: if . == null then "–" else ((. * 100 | round) / 100 | tostring) end;
    def w(x): if x == null then "–" else "\(x.answered_in_window // x.answered) / \(x.calls)" end;
    def wa(x): if x == null then "–" else "\(x.answered) / \(x.calls)" end;
    $m[0] as $m | $e[0] as $e | $m.faults[0] as $f |
    "| \($s) | \($f.kind) \($f.target) at \($f.t0_s | r) s" + (if $f.heal_s then ", healed \($f.heal_s | r) s" else "" end) +
    (if ($m.faults | length) > 1 then " (+ " + ([$m.faults[1:][] | "\(.kind) \(.target) at \(.t0_s | r) s"] | join(", ")) + ")" else "" end) +
    " | \($m.affected_users) | \(w($f.during)) | \(wa($f.after_heal)) " +
    "| \($m.mo.affected_users_with_success) / \($m.mt.affected_users_with_success) " +
    "| \($m.mo.interruption_s.p50 | r) / \($m.mo.interruption_s.max | r), \($m.mt.interruption_s.p50 | r) / \($m.mt.interruption_s.max | r) " +
    "| " + ([$m.faults[] | .time_to_detect_s | to_entries[] | "\(.key) \(.value | r)"] | unique_by(split(" ")[0]) | join(", ") | if . == "" then "none" else . end) +
    " | \([$e.results[] | select(.ok)] | length) / \($e.results | length)" +
    (if $e.passed then "" else " (failed: " + ([$e.results[] | select(.ok | not) | .name] | join("; ")) + ")" end) + " |"'
done
