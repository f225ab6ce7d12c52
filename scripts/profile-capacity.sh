#!/usr/bin/env bash
# Where a full-chain call's CPU goes: runs one capacity step of `imslab bench` (the default lab, N phones placing
# Poisson calls through the whole chain, message trace and events on as by default) with every node writing a CPU
# profile of its life (IMSLAB_CPUPROFILE_DIR, internal/runtime/obs/profile.go), then writes a breakdown of those profiles:
#   - per node: CPU seconds sampled over the node's life (registration of the phones included);
#   - by kind of work, over all nodes: every sample counted once, by the function it was in (flat), grouped by
#     package (GC and allocation, the scheduler, system calls, sipgo, go-diameter, bbolt, the lab's own code, the
#     rest of the standard library);
#   - by activity, over all nodes: samples with a given function anywhere on the stack (cum; these overlap).
#
#   scripts/profile-capacity.sh [--rate 120] [--duration 30s] [--out DIR] [--bin-dir DIR]
#   scripts/profile-capacity.sh --kind registration --rate 300 --duration 10s   # a registration step instead
#   scripts/profile-capacity.sh --breakdown-only --out DIR     # only (re)write DIR/breakdown.md from DIR/profiles
#
# Output: DIR/bench.md and bench.json (the step, with the nodes' CPU ms per answered call), DIR/profiles/*.pprof
# (open one with `go tool pprof -http=: DIR/profiles/bac.cpu.pprof`, or all of them merged) and DIR/breakdown.md.
# The step's run directory (trace, events) is removed at the end; its report.md and summary.json are kept.
# Ports: the bench's defaults (45053-45099).
set -euo pipefail
cd "$(dirname "$0")/.."
rate=120 duration=30s out="docs/results/bench/profile-$(date -u +%Y-%m-%d)" bindir="" only="" kind=capacity
while [ $# -gt 0 ]; do
  case $1 in
    --rate) rate=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --bin-dir) bindir=$2; shift 2 ;;
    --breakdown-only) only=1; shift ;;
    --kind) kind=$2; shift 2 ;;
    *) echo "usage: $0 [--rate 120] [--duration 30s] [--out DIR] [--bin-dir DIR]" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -z "$only" ]; then
rm -rf "$out/profiles"
case $kind in
  capacity) args=(bench --kinds capacity --call-rates "$rate" --call-duration "$duration" --out "$out/bench") ;;
  registration) args=(bench --kinds registration --reg-rates "$rate" --reg-duration "$duration" --out "$out/bench") ;;
  *) echo "$0: --kind is capacity or registration, not $kind" >&2; exit 2 ;;
esac
[ -n "$bindir" ] && args+=(--bin-dir "$bindir")
go build -o "$out/imslab.tmp" ./cmd/imslab
set +e
IMSLAB_CPUPROFILE_DIR="$out/profiles" "$out/imslab.tmp" "${args[@]}" >"$out/bench.log" 2>&1
rc=$?
set -e
rm -f "$out/imslab.tmp"
[ -f "$out/bench/bench.md" ] || { echo "the bench step wrote no bench.md (exit $rc); see $out/bench.log" >&2; exit 1; }
mv "$out/bench/bench.md" "$out/bench/bench.json" "$out/"
for d in "$out"/bench/lab*-"$kind"-*/; do
  [ -d "$d" ] || continue
  mkdir -p "$out/run"
  cp "$d/report.md" "$d/summary.json" "$out/run/" 2>/dev/null || true
done
rm -rf "$out/bench"
echo "\`scripts/profile-capacity.sh --kind $kind --rate $rate --duration $duration\`, $(date -u +%Y-%m-%dT%H:%MZ)" >"$out/command.txt"
fi
ls "$out"/profiles/*.cpu.pprof >/dev/null 2>&1 || { echo "no profiles in $out/profiles" >&2; exit 1; }

top() { go tool pprof -top -nodecount=1000000 -nodefraction=0 -edgefraction=0 -unit=ms "$@" 2>/dev/null | awk 'f{print} /flat%/{f=1}'; }
{
  echo "# CPU profile of one $kind step"
  echo
  [ -f "$out/command.txt" ] && echo "$(cat "$out/command.txt"); the step itself:"
  echo "[bench.md](bench.md). Profiles: \`profiles/<node>.cpu.pprof\`, each over the node's whole life."
  echo
  echo "## Per node"
  echo
  echo "| node | CPU sampled (s) | share of all nodes |"
  echo "|---|---|---|"
  total=0
  declare -A per
  for f in "$out"/profiles/*.cpu.pprof; do
    n=$(basename "$f" .cpu.pprof)
    ms=$(top "$f" | awk '{gsub("ms","",$1); s+=$1} END{printf "%.0f", s}')
    per[$n]=$ms
    total=$((total + ms))
  done
  for n in $(printf '%s\n' "${!per[@]}" | sort); do
    awk -v n="$n" -v ms="${per[$n]}" -v t="$total" 'BEGIN{printf "| %s | %.2f | %.1f %% |\n", n, ms/1000, 100*ms/t}'
  done
  awk -v t="$total" 'BEGIN{printf "| **all nodes** | **%.2f** | 100 %% |\n", t/1000}'
  echo
  echo "## By kind of work (flat: each sample once, by the function it was in)"
  echo
  echo "| kind | CPU (s) | share |"
  echo "|---|---|---|"
  top "$out"/profiles/*.cpu.pprof | awk -v t="$total" '
    { ms=$1; gsub("ms","",ms); name=$6; for (i=7;i<=NF;i++) name=name" "$i
      k="Go standard library, other"
      if (name ~ /^runtime\.(gc|scan|mark|sweep|malloc|nextFree|memclr|heapBits|spanClass|tryDeferToSpanScan|greyobject|findObject|wbBuf|bulkBarrier|typePointers|deductAssistCredit|newobject|growslice|makeslice|extractHeapBits|writeHeapBits|\(\*mspan\)|\(\*mheap\)|\(\*mcache\)|\(\*mcentral\)|\(\*gcWork\)|\(\*gcBits\)|\(\*spanSet\)|\(\*spanInlineMarkBits\)|\(\*sweepLocked\)|\(\*pageAlloc\)|heapArenaOf|spanOf|getMCache|makeSpanClass)/) k="GC and allocation (runtime)"
      else if (name ~ /^(runtime\.|internal\/runtime\/(maps|atomic)|internal\/sync)/) k="the rest of the runtime: scheduler, goroutine stacks, maps, memmove, locks (a long tail)"
      else if (name ~ /^(internal\/runtime\/syscall|syscall\.)/) k="system calls (UDP send and receive, file writes, fsync)"
      else if (name ~ /^github.com\/emiago\/sipgo/) k="sipgo (SIP parsing, transactions, serialising)"
      else if (name ~ /^github.com\/fiorix\/go-diameter/) k="go-diameter"
      else if (name ~ /^go.etcd.io\/bbolt/) k="bbolt (the HSS store)"
      else if (name ~ /^github.com\/imslab\//) k="the lab'"'"'s own code"
      s[k]+=ms }
    END { for (k in s) printf "| %s | %.2f | %.1f %% |\n", k, s[k]/1000, 100*s[k]/t }' | sort -t'|' -k3 -rn
  echo
  echo "## By activity (cum: samples with the function anywhere on the stack; rows overlap)"
  echo
  echo "| activity | function | CPU (s) | share |"
  echo "|---|---|---|---|"
  go tool pprof -top -cum -nodecount=1000000 -nodefraction=0 -edgefraction=0 -unit=ms "$out"/profiles/*.cpu.pprof 2>/dev/null | awk -v t="$total" '
    BEGIN {
      a["github.com/emiago/sipgo/sip.(*Parser).ParseSIP"]="parsing SIP messages"
      a["github.com/emiago/sipgo/sip.(*headers).StringWrite"]="serialising SIP headers"
      a["syscall.sendto"]="sending UDP datagrams (the system call)"
      a["syscall.recvfrom"]="receiving UDP datagrams (the system call)"
      a["runtime.gcBgMarkWorker"]="the collector'"'"'s background marking"
      a["runtime.mallocgc"]="allocating (with the marking it is made to assist)"
      a["github.com/imslab/quasipool/internal/obs.(*Tracer).RecordAddr"]="recording the message trace (pcapng)"
      a["github.com/imslab/quasipool/internal/obs.(*Recorder).Emit"]="writing events (events/*.jsonl)"
      a["github.com/imslab/quasipool/internal/sipx.(*Forwarder).Forward"]="forwarding requests (target choice, copy, client transaction)"
      a["github.com/imslab/quasipool/internal/sipx.(*Forwarder).Relay"]="relaying answers back"
      a["github.com/fiorix/go-diameter/v4/diam.(*conn).serve"]="Diameter: reading and dispatching messages"
      a["go.etcd.io/bbolt.(*DB).Update"]="HSS store writes (bbolt, with fsync)"
      a["github.com/imslab/quasipool/internal/hss/store.(*DB).commit"]="HSS store commits"
    }
    { ms=$4; gsub("ms","",ms); name=$6; for (i=7;i<=NF;i++) name=name" "$i
      sub(/ \(inline\)$/, "", name)
      if (name in a) printf "| %s | `%s` | %.2f | %.1f %% |\n", a[name], name, ms/1000, 100*ms/t }' | sort -t'|' -k4 -rn
} >"$out/breakdown.md"
echo "wrote $out/breakdown.md, $out/bench.md and $out/profiles/"
