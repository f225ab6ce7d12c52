#!/usr/bin/env bash
# How busy an idle compose lab keeps the machine: brings a compose lab of the default topology up (no phones, no
# traffic), waits until every container runs (and, with healthchecks, is healthy), then reads /proc/stat over a
# window and prints the share of all cores that was busy (user, nice, system, irq, softirq), and takes the lab down.
#
#   scripts/compose-idle-cpu.sh [--repeat K] [seconds]     (default 1 repetition, 10 s; Docker with compose)
#
# Each repetition measures two labs one after the other: "healthchecks", the committed docker-compose.yml (the
# engine runs `imslab probe` in every container every 5 s), and "none", the same lab generated with
# `imslab compose --no-healthcheck` (what a scenario run as root uses: the lab checks readiness itself, once, from
# inside each container's network namespace). The last lines are the median per mode. The figures in
# docs/results.md were taken this way.
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=1
if [[ "${1:-}" == "--repeat" ]]; then repeat=$2; shift 2; fi
win=${1:-10}
tmp=$(mktemp -d)
project=imslab-idle-$$
file=""
down() { [[ -n "$file" ]] && docker compose -p "$project" -f "$file" down -t 1 -v >/dev/null 2>&1 || true; }
trap 'down; rm -rf "$tmp"' EXIT
go run ./cmd/imslab compose --phones 0 --no-healthcheck --file "$tmp/docker-compose.yml" --config-dir "$tmp/deploy" >/dev/null
# The same lab as committed, without the traffic service (no phones: idle).
go run ./cmd/imslab compose --phones 0 --file "$tmp/hc/docker-compose.yml" --config-dir "$tmp/hc/deploy" >/dev/null
measure() { # mode file
  file=$2
  docker compose -p "$project" -f "$file" up -d --wait >/dev/null
  sleep 3
  read -r _ u1 n1 s1 i1 w1 q1 sq1 _ < /proc/stat
  sleep "$win"
  read -r _ u2 n2 s2 i2 w2 q2 sq2 _ < /proc/stat
  down
  busy=$(( (u2 + n2 + s2 + q2 + sq2) - (u1 + n1 + s1 + q1 + sq1) ))
  total=$(( busy + (i2 - i1) + (w2 - w1) ))
  echo "$1 $(( 1000 * busy / total ))" >> "$tmp/results"
  echo "idle compose lab, $1: $busy of $total ticks busy over ${win} s: $(( 100 * busy / total )) % of $(nproc) cores"
}
for _ in $(seq 1 "$repeat"); do
  measure healthchecks "$tmp/hc/docker-compose.yml"
  measure none "$tmp/docker-compose.yml"
done
for m in healthchecks none; do
  sort -n -k2 <(grep "^$m " "$tmp/results") | awk -v m="$m" -v n="$repeat" '{v[NR]=$2} END {
    med = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2
    printf "%s: median %.1f %% of all cores busy (min %.1f, max %.1f; n = %d windows)\n", m, med/10, v[1]/10, v[NR]/10, n }'
done
