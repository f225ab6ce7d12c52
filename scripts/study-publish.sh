#!/usr/bin/env bash
# Copies what a study produced into a directory that can be committed: study.json, study.md (and figures/ and
# results*.md when present) and, for every finished run, the files its results come from (study-run.json,
# study-env.json, summary.json, expectations.json, users.csv, scenario.json), not the traces, logs and events.
# Repetition 1 of every experiment and scheme (the same seed, victim and instant for every scheme) also keeps its
# ladder diagrams, timeline and restoration curve (plots/ladder_mo.svg/png, ladder_mt.svg/png, timeline.svg/png,
# restore.svg/png): the example runs docs/results.md links to.
#
#   scripts/study-publish.sh runs/study-published docs/results/study-published
#   scripts/study-publish.sh --no-plots runs/study-sweeps docs/results/sweeps
#
# --no-plots copies neither the example runs' plots nor figures/ (a partial study's provisional figures, which
# every later publication would replace: about 15 MiB for the sweeps; docs/study.md, "Publishing and resuming").
#
# The copy is also a resumable study directory: a finished run is recognised by study-run.json, summary.json and
# expectations.json, so on another machine
#
#   cp -r docs/results/study-published runs/study-published
#   go run ./cmd/imslab study studies/published.yaml
#
# runs only the runs not in it yet (docs/study.md, "Resuming").
set -euo pipefail
plots=1
[ "${1:-}" = --no-plots ] && { plots=0; shift; }
src=${1:?usage: study-publish.sh <study out dir> <dest dir>}
dst=${2:?usage: study-publish.sh <study out dir> <dest dir>}
[ -f "$src/study.json" ] || { echo "study-publish: $src/study.json not found: not a study's out dir" >&2; exit 2; }
mkdir -p "$dst"
n=0
while IFS= read -r rec; do
	run=$(dirname "$rec")
	[ -f "$run/summary.json" ] && [ -f "$run/expectations.json" ] || continue # unfinished: not published
	rel=${run#"$src"/}
	mkdir -p "$dst/$rel"
	for f in study-run.json study-env.json summary.json expectations.json users.csv scenario.json; do
		[ -f "$run/$f" ] && cp "$run/$f" "$dst/$rel/$f"
	done
	if [ "$plots" = 1 ] && [ "$(basename "$run")" = rep1 ]; then
		mkdir -p "$dst/$rel/plots"
		for f in ladder_mo.svg ladder_mo.png ladder_mt.svg ladder_mt.png timeline.svg timeline.png restore.svg restore.png; do
			if [ -f "$run/plots/$f" ]; then cp "$run/plots/$f" "$dst/$rel/plots/$f"; fi
		done
	fi
	n=$((n + 1))
done < <(find "$src" -name study-run.json | sort)
for f in study.json study.md results.md; do
	[ -f "$src/$f" ] && cp "$src/$f" "$dst/$f"
done
[ "$plots" = 1 ] && [ -d "$src/figures" ] && { rm -rf "$dst/figures"; cp -r "$src/figures" "$dst/figures"; }
echo "study-publish: $n finished runs and the study's outputs copied to $dst ($(du -sh "$dst" | cut -f1))"
