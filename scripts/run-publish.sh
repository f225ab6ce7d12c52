#!/usr/bin/env bash
# Copies what a large run's results come from into a directory that can be committed (issue 13's 100k storms):
# summary.json gzipped (its per-user arrays make it megabytes), scenario.json, expectations.json, report.md, the
# plots, the scenario file it ran, and probes.json: the reachability probes counted from records.jsonl by kind and
# outcome (records.jsonl itself, tens of MB, is not kept). Not the traces, logs, events, calls.csv or users.csv.
#
#   scripts/run-publish.sh runs/storm-100k-pcscf-loadsharing scenarios/scale/storm-100k-pcscf-loadsharing.yaml \
#     docs/results/issue13/storm-100k-pcscf-loadsharing
#
# Read the summary with `zcat <dir>/summary.json.gz | jq ...`.
set -euo pipefail
usage="usage: run-publish.sh <run dir> <scenario.yaml> <dest dir>"
src=${1:?$usage}
scen=${2:?$usage}
dst=${3:?$usage}
for f in summary.json scenario.json expectations.json report.md records.jsonl; do
	[ -f "$src/$f" ] || { echo "run-publish: $src/$f not found: not a finished run directory" >&2; exit 2; }
done
[ -f "$scen" ] || { echo "run-publish: $scen not found" >&2; exit 2; }
mkdir -p "$dst/plots"
gzip -9 -n -c "$src/summary.json" > "$dst/summary.json.gz"
cp "$src/scenario.json" "$src/expectations.json" "$dst/"
# report.md's links to the files not kept: to the gzipped summary, calls.csv named but not linked
sed -e 's#\[summary.json\](summary.json)#[summary.json.gz](summary.json.gz)#g' \
	-e 's#\[calls.csv\](calls.csv)#calls.csv (not kept)#g' "$src/report.md" > "$dst/report.md"
cp "$scen" "$dst/scenario.yaml"
for f in "$src"/plots/*.svg "$src"/plots/*.png; do
	[ -f "$f" ] && cp "$f" "$dst/plots/"
done
# The probes (records of type call with a probe field: mo or mt) by kind and result; every MT probe is a
# terminating request that costs the I-CSCF an LIR at the HSS, which the run's Cx counts include.
jq -s '[.[] | select(.type == "call" and .probe != null)]
	| group_by(.probe)
	| map({(.[0].probe): {attempts: length, ok: (map(select(.result == "ok")) | length),
		span_s: ((map(.t_ns) | min) as $a | (map(.t_ns) | max) as $b | (($b - $a) / 1e9))}})
	| add // {}' "$src/records.jsonl" > "$dst/probes.json"
du -sh "$dst" | awk -v d="$dst" '{print "run-publish: " d " (" $1 ")"}'
