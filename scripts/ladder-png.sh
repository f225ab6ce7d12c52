#!/usr/bin/env bash
# Renders a PNG beside every committed ladder diagram that has only its SVG (plots/ladder_mo.svg, ladder_mt.svg of
# the example runs under the given directories), with rsvg-convert (Debian package librsvg2-bin) at twice the SVG's
# size on white. The lab writes both itself when the run's message trace is there (internal/analysis/report); this is for
# example runs published before it did, whose traces are gone, so the figure is the committed SVG's, unchanged.
#
#   scripts/ladder-png.sh docs/results/study-published
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: ladder-png.sh <dir>..." >&2; exit 2; }
command -v rsvg-convert >/dev/null || { echo "ladder-png: rsvg-convert not found: apt-get install librsvg2-bin" >&2; exit 2; }
n=0
while IFS= read -r svg; do
	png=${svg%.svg}.png
	[ -f "$png" ] && continue
	rsvg-convert --zoom 2 --background-color white -o "$png" "$svg"
	echo "ladder-png: $png"
	n=$((n + 1))
done < <(find "$@" -path '*/plots/ladder_m[ot].svg' | sort)
echo "ladder-png: $n PNGs written"
