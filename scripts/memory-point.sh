#!/usr/bin/env bash
# The memory point (issue 13: "100k registered phones in <= 1.5 GB all nodes"): N phones register through the
# default lab (3 P-CSCF, 3 S-CSCF, the nodes' default memory limit) at a fixed rate and make no calls; the run
# goes on for --hold after every phone has registered (t0). The lab samples every node's resident memory each
# second (events/lab.jsonl, kind resource) and the runner its own process, which runs the phones; `imslab memory`
# turns that into the table: each node before the registrations, at t0 and at its peak after t0, the sum over
# the nodes, the cost per registered phone, and the phones' process apart.
#
#   scripts/memory-point.sh --phones 10000 [--rate 300] [--hold 20s] [--trace on|off] [--out DIR]
#
# Output: DIR/memory-<N>.json and DIR/memory-<N>.txt (imslab memory), DIR/run-<N>.txt (the run's console),
# DIR/machine-<N>.txt (nproc, memory, load average before and after). The run directory itself (large) is
# runs/memory-<N> and is not kept in DIR. Everything runs on CPU 1 (taskset -c 1); the lab uses ports
# 46000-46099 (private block of this measurement).
set -euo pipefail
cd "$(dirname "$0")/.."
phones=10000 rate=300 hold=20s trace=off out="docs/results/memory"
while [ $# -gt 0 ]; do
  case $1 in
    --phones) phones=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --hold) hold=$2; shift 2 ;;
    --trace) trace=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 --phones N [--rate 300] [--hold 20s] [--trace on|off] [--out DIR]" >&2; exit 2 ;;
  esac
done
case $trace in on) traceoff=false ;; off) traceoff=true ;; *) echo "--trace on|off" >&2; exit 2 ;; esac
mkdir -p "$out" runs
scen=$(mktemp --suffix=.yaml)
trap 'rm -f "$scen"' EXIT
cat >"$scen" <<YAML
name: memory-$phones
description: >
  Memory point: $phones phones register at $rate/s through the default lab and make no calls; the nodes' resident
  memory at t0 (every phone registered) and over the $hold after it (scripts/memory-point.sh).
duration: $hold
topology:
  dns: {listen: 127.0.0.1:46053}
  hss: {diameter_port: 46068, http_port: 46090}
  bac: {port: 46060}
  icscf: {port: 46070}
  pools: {pcscf: {base_port: 46061}, scscf: {base_port: 46081}}
  registration: {expires: 3600s}   # no refresh during the run
  trace: {off: $traceoff}
traffic:
  phones: $phones
  register_rate: $rate
  call_rate: 0
YAML
m="$out/machine-$phones.txt"
{ echo "date: $(date -u +%FT%TZ)"; echo "commit: $(git rev-parse --short HEAD) (dirty: $(git status --porcelain | wc -l) paths)";
  echo "nproc: $(nproc)"; grep -E 'MemTotal|MemAvailable' /proc/meminfo; echo "loadavg before: $(cat /proc/loadavg)";
  echo "command: $0 --phones $phones --rate $rate --hold $hold --trace $trace"; } >"$m"
rm -rf "runs/memory-$phones"
status=0
taskset -c 1 go run ./cmd/imslab run "$scen" --out "runs/memory-$phones" --keep-going --progress 10s \
  >"$out/run-$phones.txt" 2>&1 || status=$?
echo "loadavg after: $(cat /proc/loadavg)" >>"$m"
echo "imslab run exit status: $status" >>"$m"
taskset -c 1 go run ./cmd/imslab memory --json "$out/memory-$phones.json" "runs/memory-$phones" | tee "$out/memory-$phones.txt"
