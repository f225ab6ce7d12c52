#!/usr/bin/env bash
# Regenerates the published study's section of docs/results.md from the committed runs in
# docs/results/study-published (study.json, study.md, results.md and figures/ are rewritten from the runs' summaries;
# nothing is run):
#
#   scripts/results-md.sh
#
# The section between the markers `<!-- study:published:begin -->` and `<!-- study:published:end -->` is replaced by
# the study's results.md, its links made relative to docs/. Exit status 0 also while runs of the study are pending
# (the tables say how many).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=docs/results/study-published
[ -f "$dir/study.json" ] || { echo "results-md: $dir/study.json not found" >&2; exit 2; }
rc=0
go run ./cmd/imslab study studies/published.yaml --results-only --out "$dir" || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] || { echo "results-md: imslab study --results-only failed ($rc)" >&2; exit "$rc"; }
frag=$(mktemp)
trap 'rm -f "$frag"' EXIT
sed -e 's#](figures/#](results/study-published/figures/#g' \
    -e 's#](\([a-z0-9-]*\)/\([^)]*\)/rep\([0-9]*\)/#](results/study-published/\1/\2/rep\3/#g' "$dir/results.md" > "$frag"
grep -q '<!-- study:published:begin -->' docs/results.md || { echo "results-md: markers missing in docs/results.md" >&2; exit 2; }
awk -v frag="$frag" '
	/<!-- study:published:begin -->/ { print; while ((getline l < frag) > 0) print l; skip = 1; next }
	/<!-- study:published:end -->/ { skip = 0 }
	!skip { print }
' docs/results.md > docs/results.md.new
mv docs/results.md.new docs/results.md
echo "results-md: docs/results.md updated from $dir/study.json"
