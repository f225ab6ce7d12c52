#!/usr/bin/env bash
# Regenerates a study's section of docs/results.md from its committed runs in docs/results/study-<name>
# (study.json, study.md, results.md and figures/ are rewritten from the runs' summaries; nothing is run):
#
#   scripts/results-md.sh            # studies/published.yaml
#   scripts/results-md.sh risk       # studies/risk.yaml
#   scripts/results-md.sh sweeps docs/results/sweeps   # a study published elsewhere than docs/results/study-<name>
#
# The section between the markers `<!-- study:<name>:begin -->` and `<!-- study:<name>:end -->` is replaced by the
# study's results.md, its links made relative to docs/. Exit status 0 also while runs of the study are pending (the
# tables say how many).
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-published}
dir=${2:-docs/results/study-$name}
dir=${dir%/}
rel=${dir#docs/} # the directory as docs/results.md links to it
[ -f "studies/$name.yaml" ] || { echo "results-md: studies/$name.yaml not found" >&2; exit 2; }
[ -f "$dir/study.json" ] || { echo "results-md: $dir/study.json not found" >&2; exit 2; }
rc=0
go run ./cmd/imslab study "studies/$name.yaml" --results-only --out "$dir" || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] || { echo "results-md: imslab study --results-only failed ($rc)" >&2; exit "$rc"; }
frag=$(mktemp)
trap 'rm -f "$frag"' EXIT
sed -e "s#](figures/#]($rel/figures/#g" \
    -e "s#](\([a-z0-9-]*\)/\([^)]*\)/rep\([0-9]*\)/#]($rel/\1/\2/rep\3/#g" "$dir/results.md" > "$frag"
# The example runs (repetition 1 of every experiment and scheme) whose plots study-publish.sh kept.
examples=""
for d in "$dir"/*/*/rep1/plots; do
	[ -d "$d" ] || continue
	run=${d%/plots}
	run_rel=${run#"$dir"/}
	links=""
	for f in ladder_mo.svg:"MO ladder" ladder_mt.svg:"MT ladder" timeline.svg:timeline restore.svg:"restoration curve"; do
		file=${f%%:*}
		[ -f "$d/$file" ] && links="$links [${f#*:}]($rel/$run_rel/plots/$file)"
		png=${file%.svg}.png
		[ -f "$d/$file" ] && [ -f "$d/$png" ] && links="$links ([PNG]($rel/$run_rel/plots/$png))"
	done
	[ -n "$links" ] && examples="$examples- \`$run_rel\` (seed $(jq -r .seed "$run/study-run.json")):$links"$'\n'
done
if [ -n "$examples" ]; then
	printf '\nExample runs: repetition 1 of every experiment and scheme (one seed: the same victim, instant and users for every scheme), with the ladder diagrams of one takeover call per direction (where the run has one), the timeline around the fault and the restoration curve:\n\n%s' "$examples" >> "$frag"
fi
grep -q "<!-- study:$name:begin -->" docs/results.md || { echo "results-md: markers <!-- study:$name:begin/end --> missing in docs/results.md" >&2; exit 2; }
awk -v frag="$frag" -v begin="<!-- study:$name:begin -->" -v end="<!-- study:$name:end -->" '
	index($0, begin) { print; while ((getline l < frag) > 0) print l; skip = 1; next }
	index($0, end) { skip = 0 }
	!skip { print }
' docs/results.md > docs/results.md.new
mv docs/results.md.new docs/results.md
echo "results-md: docs/results.md updated from $dir/study.json"
