#!/bin/sh
# Run a scenario file against a fresh compose lab (its own project, network and data in the run directory):
#   scenarios/compose/run.sh scenarios/pcscf-kill.yaml [--out runs/x] [--seed 7]
# The same as: go run ./cmd/imslab run --backend compose <scenario.yaml> …  (exit 0 passed, 1 failed, 2 error)
set -eu
cd "$(dirname "$0")/../.."
exec go run ./cmd/imslab run --backend compose "$@"
