#!/bin/sh
# Kill a node of the running compose lab (docker compose up -d), keep it down, then start it again (empty):
#   scenarios/compose/kill.sh pcscf1 [seconds-down, default 30]
# Watch the takeover meanwhile: docker compose logs -f bac icscf; the traffic service's records in the volume.
set -eu
node=${1:?usage: kill.sh <service> [seconds-down]}
down=${2:-30}
cd "$(dirname "$0")/../.."
echo "$(date +%T.%3N) kill $node"
docker compose kill -s SIGKILL "$node"
sleep "$down"
echo "$(date +%T.%3N) start $node"
docker compose start "$node"
