#!/usr/bin/env bash
# How long the HSS takes to provision the lab population user0001…user<N> (lab_subscriber_count) on a fresh
# database, and again on the same database (the idempotent restart), on CPU 1. Ports 46101-46102.
#
#   scripts/hss-import-time.sh [--count 100000] [--out docs/results/memory/hss-import.txt]
set -euo pipefail
cd "$(dirname "$0")/.."
count=100000 out=docs/results/memory/hss-import.txt
while [ $# -gt 0 ]; do
  case $1 in
    --count) count=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--count 100000] [--out FILE]" >&2; exit 2 ;;
  esac
done
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
taskset -c 1 go build -o "$tmp/hss" ./cmd/hss
mkdir -p "$(dirname "$out")"
{ echo "date: $(date -u +%FT%TZ)  commit: $(git rev-parse --short HEAD)  nproc: $(nproc)  loadavg: $(cat /proc/loadavg)"
  echo "command: $0 --count $count"; } >"$out"
for pass in fresh restart; do
  taskset -c 1 "$tmp/hss" --lab-subscribers --lab-subscriber-count "$count" --allow-any-peer --data-dir "$tmp/data" \
    --diameter-listen 127.0.0.1:46101 --http-listen 127.0.0.1:46102 >"$tmp/log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q 'hss ready' "$tmp/log" && break; sleep 0.1; done
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  echo "$pass: $(grep 'subscribers imported' "$tmp/log")" >>"$out"
done
cat "$out"
