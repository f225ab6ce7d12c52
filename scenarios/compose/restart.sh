#!/bin/sh
# Restart a node of the running compose lab: graceful stop and start, without the state it had in memory:
#   scenarios/compose/restart.sh scscf1
set -eu
node=${1:?usage: restart.sh <service>}
cd "$(dirname "$0")/../.."
echo "$(date +%T.%3N) restart $node"
docker compose restart "$node"
