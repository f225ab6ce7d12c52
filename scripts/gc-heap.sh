#!/usr/bin/env bash
# Measures the Go heap of one lab proxy hop under a steady SIPp call load, to size the nodes' soft memory limit
# (internal/runtime/nfrun --memory-limit-mib): `imslab bench relay` (one sipx.Proxy with events and the pcapng trace on,
# as a node records by default) between a SIPp caller (sipp/bench-uac.xml) and a SIPp callee (bench-uas.xml),
# all on CPU 1, with GODEBUG=gctrace=1. From the collector's trace it writes, per rate: the live heap after each
# collection (its maximum once the 32 s transaction timers have filled up), the number of collections, and the
# share of CPU the collector reported.
#
#   scripts/gc-heap.sh [--rates 100,300] [--duration 45s] [--limit-mib 128] [--out DIR]
#
# Output: DIR/gctrace-<rate>-<limit>.txt (the runtime's lines as written) and DIR/summary.txt (a table computed
# from them). Ports 43100-43199. Needs sipp.
set -euo pipefail
cd "$(dirname "$0")/.."
rates=100,300 duration=45 limit=128 out="docs/results/bench/gc-$(date -u +%Y-%m-%d)"
while [ $# -gt 0 ]; do
  case $1 in
    --rates) rates=$2; shift 2 ;;
    --duration) duration=${2%s}; shift 2 ;;
    --limit-mib) limit=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--rates 100,300] [--duration 45s] [--limit-mib 128] [--out DIR]" >&2; exit 2 ;;
  esac
done
command -v sipp >/dev/null || { echo "sipp not found (apt-get install -y sip-tester)" >&2; exit 2; }
mkdir -p "$out"
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
taskset -c 1 go build -o "$tmp/imslab" ./cmd/imslab
proxy=127.0.0.1:43160 uas=127.0.0.1:43170 uacport=43180
for rate in ${rates//,/ }; do
  log="$out/gctrace-$rate-${limit}mib.txt"
  taskset -c 1 sipp -sf sipp/bench-uas.xml -i 127.0.0.1 -p 43170 -nostdin -max_socket 1024 >/dev/null 2>&1 &
  uaspid=$!
  pids+=("$uaspid")
  GOMEMLIMIT="${limit}MiB" GODEBUG=gctrace=1 taskset -c 1 "$tmp/imslab" bench relay --listen "$proxy" --next "$uas" \
    --trust "127.0.0.1:$uacport,$uas" --events "$tmp/events.jsonl" --trace "$tmp/trace.pcapng" 2>"$log" &
  relay=$!
  pids+=("$relay")
  sleep 2
  calls=$((rate * duration))
  t0=$(date +%s.%N)
  # A call that gets no answer within 10 s fails; the whole run is cut at twice its length.
  (cd "$tmp" && timeout $((2 * duration + 30)) taskset -c 1 sipp "$proxy" -sf "$OLDPWD/sipp/bench-uac.xml" -s callee \
    -i 127.0.0.1 -p "$uacport" -r "$rate" -m "$calls" -recv_timeout 10000 -nostdin -default_behaviors all,-abortunexp \
    -trace_stat -stf "stat-$rate.csv" >/dev/null 2>&1) || true
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
  ok=$(awk -F';' 'NR==1 { for (i = 1; i <= NF; i++) if ($i == "SuccessfulCall(C)") c = i } END { print $c }' "$tmp/stat-$rate.csv")
  failed=$(awk -F';' 'NR==1 { for (i = 1; i <= NF; i++) if ($i == "FailedCall(C)") c = i } END { print $c }' "$tmp/stat-$rate.csv")
  kill "$relay"; wait "$relay" 2>/dev/null || true
  kill "$uaspid" 2>/dev/null || true
  wait "$uaspid" 2>/dev/null || true
  echo "# rate $rate calls/s for ${duration}s, GOMEMLIMIT=${limit}MiB: SIPp calls ok $ok, failed $failed, SIPp ran $(printf %.1f "$secs") s" >>"$log"
  rm -rf "$tmp/events.jsonl" "$tmp"/trace*
done
{
  echo "# gc-heap: imslab bench relay (events + trace on) under SIPp calls, CPU 1 only (shared machine), $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD)"
  echo "# live heap = the third figure of gctrace's 'A->B->C MB' (heap marked live by that collection);"
  echo "# steady = collections after the first 35 s (the 32 s UDP transaction timers have filled up); GC CPU = the"
  echo "# last gctrace line's share of the process's CPU spent in the collector since start."
  printf "%-8s %-10s %-26s %-8s %-14s %-16s %-16s %-8s\n" rate limit "SIPp ok/failed in" GCs "GCs steady" "max live MB" "median live MB" "GC CPU"
  for f in "$out"/gctrace-*-"${limit}"mib.txt; do
    rate=$(basename "$f" | cut -d- -f2)
    awk -v rate="$rate" -v limit="${limit}MiB" '
      /^gc [0-9]+ @/ {
        n++; t = $3; sub(/^@/, "", t); sub(/s$/, "", t); pct = $4; sub(/:$/, "", pct)
        for (i = 1; i <= NF; i++) if ($i ~ /->.*->/) { split($i, a, "->"); live = a[3] + 0 }
        if (t + 0 >= 35) { s++; xs[s] = live; if (live > mx) mx = live }
      }
      /^# rate/ { ok = $0; sub(/.*calls ok /, "", ok); sub(/, failed /, "/", ok); sub(/, SIPp ran /, " in ", ok); sub(/ s$/, "s", ok) }
      END {
        for (i = 1; i <= s; i++) for (j = i + 1; j <= s; j++) if (xs[j] < xs[i]) { t = xs[i]; xs[i] = xs[j]; xs[j] = t }
        med = s ? ((s % 2) ? xs[(s + 1) / 2] : (xs[s / 2] + xs[s / 2 + 1]) / 2) : 0
        printf "%-8s %-10s %-26s %-8d %-14d %-16s %-16s %-8s\n", rate, limit, ok, n, s, mx, med, pct
      }' "$f"
  done
} >"$out/summary-${limit}mib.txt"
cat "$out/summary-${limit}mib.txt"
