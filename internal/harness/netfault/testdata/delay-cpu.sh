#!/bin/sh
# Regenerates testdata/delay-cpu.txt: runs the delay line's CPU spec ("costs little CPU", delay_test.go) five
# times without the race detector (the child is the test binary started again: with -race it would carry the
# detector's cost) and keeps its report entries, the figures docs/faults.md quotes. As root, from the repository
# root, on a core of its own if the machine is busy (the CPU times do not depend much on other load, the packets
# offered do):
#   taskset -c 0 sh internal/harness/netfault/testdata/delay-cpu.sh > internal/harness/netfault/testdata/delay-cpu.txt
set -e
echo "# go test -count=1 -v ./internal/harness/netfault/ -args -ginkgo.v -ginkgo.focus='costs little CPU', 5 times"
echo "# $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- internal/harness/netfault || echo '+dirty'), $(uname -r), $(nproc --all) cores, CPUs allowed $(grep Cpus_allowed_list /proc/self/status | cut -f2), load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
go test -c -o /tmp/netfault-cpu.test ./internal/harness/netfault/
for i in 1 2 3 4 5; do
	out=$(cd internal/harness/netfault && /tmp/netfault-cpu.test -test.count=1 -test.v -ginkgo.v -ginkgo.no-color -ginkgo.focus='costs little CPU' 2>&1) || true
	echo "$out" | grep -E '^    idle for ' | sed "s/^    /run $i: /"
	echo "$out" | grep -E '^(FAIL|--- FAIL)' || true
done
rm -f /tmp/netfault-cpu.test
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
