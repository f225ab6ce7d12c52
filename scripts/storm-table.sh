#!/usr/bin/env bash
# Prints a markdown table of storm runs published by scripts/run-publish.sh, one column per run, every figure read
# from the run's summary.json.gz and probes.json (nothing typed):
#
#   scripts/storm-table.sh docs/results/issue13/storm-100k-pcscf-loadsharing docs/results/issue13/storm-100k-scscf-quasipool
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: storm-table.sh <published run dir>..." >&2; exit 2; }
rows=(
	"affected users|.s.affected_users"
	"affected users probed (reachability.sample)|.s.survival.users"
	"probed users restored by detection + one probe interval|.s.survival.restored_at_bound"
	"probed users restored by the end (MT and MO)|\"\\(.s.survival.service.restored) of \\(.s.survival.service.n)\""
	"median time to restore, probed users (s)|(.s.survival.service.median_s // \"not reached\")"
	"registrations/s: baseline → peak (at s after t0)|\"\\(.s.storm.register.baseline_per_s) → \\(.s.storm.register.peak_per_s) (\\(.s.storm.register.peak_at_s | floor))\""
	"registrations after the fault|.s.storm.register.total"
	"registrations/s from the fault on: median of the seconds|(.s.storm.register.per_s | sort | .[length/2|floor])"
	"Cx/s at the HSS, all commands: baseline → peak|\"\\(.s.storm.cx.total.baseline_per_s) → \\(.s.storm.cx.total.peak_per_s)\""
	"Cx/s at the HSS from the fault on: median of the seconds|(.s.storm.cx.total.per_s | sort | .[length/2|floor])"
	"UAR / MAR / SAR / LIR after the fault|\"\\(.s.storm.cx.UAR.total // 0) / \\(.s.storm.cx.MAR.total // 0) / \\(.s.storm.cx.SAR.total // 0) / \\(.s.storm.cx.LIR.total // 0)\""
	"LIR/s: baseline → peak|\"\\(.s.storm.cx.LIR.baseline_per_s // 0) → \\(.s.storm.cx.LIR.peak_per_s // 0)\""
	"of the LIRs: MT probes (one LIR each) / LIR with User-Authorization-Type 2|\"\\(.p.mt.attempts // 0) / \\(.s.cx_after_fault.LIR.uat2 // 0)\""
	"SAR restoring a registration (Server-Assignment-Type 3) after the fault|(.s.cx_after_fault.SAR.sat3 // 0)"
	"affected users' own calls after the fault, answered / attempted: MO, MT|\"\(.s.mo.succeeded) / \(.s.mo.attempts), \(.s.mt.succeeded) / \(.s.mt.attempts)\""
	"calls / registrations failed after the fault|\"\\(.s.storm.calls_failed) / \\(.s.storm.registrations_failed)\""
	"affected users back by their own traffic (a registration or call)|\"\\(.s.storm.users_back) of \\(.s.storm.affected_users)\""
	"time to back p50 / p95 / max (s)|(if .s.storm.back_s.count > 0 then \"\\(.s.storm.back_s.p50 | .*10 | round / 10) / \\(.s.storm.back_s.p95 | .*10 | round / 10) / \\(.s.storm.back_s.max | .*10 | round / 10)\" else \"–\" end)"
	"load shed (overload events)|(if .s.overload == null then \"none\" else (.s.overload | to_entries | map(\"\\(.key) \\(.value.shed)\") | join(\", \")) end)"
)
# One parse of each run's summary: every row's value, tab-separated, in the rows' order.
exprs=()
for r in "${rows[@]}"; do exprs+=("(${r#*|} | tostring)"); done
prog="{s: ., p: (\$p[0] // {})} | [$(IFS=,; echo "${exprs[*]}")] | join(\"\t\")"
declare -A vals
for d in "$@"; do
	[ -f "$d/summary.json.gz" ] || { echo "storm-table: $d/summary.json.gz not found" >&2; exit 2; }
	p="$d/probes.json"
	[ -f "$p" ] || p=/dev/null
	vals[$d]=$(zcat "$d/summary.json.gz" | jq -r --slurpfile p <(cat "$p" 2>/dev/null || echo '{}') "$prog")
done
printf '|'
for d in "$@"; do printf ' | `%s`' "$(basename "$d")"; done
printf ' |\n|---'
for _ in "$@"; do printf '|---'; done
printf '|\n'
for i in "${!rows[@]}"; do
	printf '| %s' "${rows[$i]%%|*}"
	for d in "$@"; do
		IFS=$'\t' read -r -a v <<< "${vals[$d]}"
		printf ' | %s' "${v[$i]}"
	done
	printf ' |\n'
done
