#!/bin/sh
# Regenerates testdata/delay-report.txt: runs the delay specs of this package
# (as root; they build their own namespaces) and keeps their report entries,
# the figures docs/faults.md quotes. Run from the repository root:
#   sh internal/harness/netfault/testdata/delay-report.sh > internal/harness/netfault/testdata/delay-report.txt
set -e
echo "# go test -race -count=1 -v ./internal/harness/netfault/ -args -ginkgo.v -ginkgo.focus=delay"
echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
out=$(go test -race -count=1 -v ./internal/harness/netfault/ -args -ginkgo.v -ginkgo.no-color -ginkgo.focus=delay 2>&1) || true
echo "$out" | grep -E -A1 ' - .*/internal/netfault/[a-z_]+_test\.go:[0-9]+ @ |\[FAILED\] in \[It\]' \
	| grep -v '^--$' | sed -E 's| - .*/internal/netfault/([a-z_]+_test\.go):[0-9]+ @ .*| (\1)|'
echo "$out" | grep -E '^(Ran|SUCCESS|FAIL|ok|--- )' || true
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
