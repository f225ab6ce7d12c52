#!/bin/sh
# Freeze a node of the running compose lab (its address stays, it answers nothing), then thaw it:
#   scenarios/compose/pause.sh scscf2 [seconds-frozen, default 30]
set -eu
node=${1:?usage: pause.sh <service> [seconds-frozen]}
frozen=${2:-30}
cd "$(dirname "$0")/../.."
echo "$(date +%T.%3N) pause $node"
docker compose pause "$node"
sleep "$frozen"
echo "$(date +%T.%3N) unpause $node"
docker compose unpause "$node"
