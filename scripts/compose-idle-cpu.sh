#!/usr/bin/env bash
# How busy an idle compose lab keeps the machine: brings the committed docker-compose.yml up (no phones, no
# traffic), waits until every service is healthy, then reads /proc/stat over a window and prints the share of all
# cores that was busy (user, nice, system, irq, softirq), and takes the lab down. The figures in docs/results.md
# (45 % of 2 cores with health checks every 2 s, 28 % every 5 s; one 10 s window each) were taken this way.
#
#   scripts/compose-idle-cpu.sh [seconds]      (default 10; needs Docker with the compose plugin)
set -euo pipefail
cd "$(dirname "$0")/.."
win=${1:-10}
project=imslab-idle-$$
trap 'docker compose -p "$project" -f docker-compose.yml down -t 1 >/dev/null 2>&1 || true' EXIT
docker compose -p "$project" -f docker-compose.yml up -d --wait >/dev/null
sleep 3
read -r _ u1 n1 s1 i1 w1 q1 sq1 _ < /proc/stat
sleep "$win"
read -r _ u2 n2 s2 i2 w2 q2 sq2 _ < /proc/stat
busy=$(( (u2 + n2 + s2 + q2 + sq2) - (u1 + n1 + s1 + q1 + sq1) ))
total=$(( busy + (i2 - i1) + (w2 - w1) ))
echo "idle compose lab: $busy of $total ticks busy over ${win} s: $(( 100 * busy / total )) % of $(nproc) cores"
