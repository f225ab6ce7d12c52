#!/bin/bash
# Interleaved A/B of panic routing at 240 calls/s (seeds 11..13).
cd /work/main
go build -o /tmp/ab/imslab ./cmd/imslab || exit 1
for k in 1 2; do
  for v in on off; do
    out=/tmp/ab/runs/$v-$k
    rm -rf $out
    echo "== $v $k $(date -u +%H:%M:%S)"
    /tmp/ab/imslab run /tmp/ab/panic-$v.yaml --seed $((10+k)) --keep-going --out $out > /tmp/ab/runs-$v-$k.log 2>&1
    echo "exit $?"
  done
done
