#!/usr/bin/env bash
# Whether open-and-close cycles of MCP streams leave memory or descriptors
# behind: one replica holds the streams for `taskstore bench --scenario
# mcp-streams` again and again (changes through a second replica, nothing
# stopped), and after each cycle, with every stream closed, its RSS and open
# file descriptors are printed. A leak grows by the same amount every
# cycle; allocator fragmentation levels off.
#
#   benches/streams-cycles.sh [cycles] [streams] [listeners]   (defaults: 20, 500, 50)
#
# Same needs as benches/streams.sh; uses (and empties) the database
# taskstore_bench_streams.
set -euo pipefail
cd "$(dirname "$0")/.."

cycles=${1:-20}
streams=${2:-500}
listeners=${3:-50}
export BENCH_DATABASE=${BENCH_DATABASE:-taskstore_bench_streams}
. benches/lib.sh
# Ports below the ephemeral range (32768-60999 here), so that no outgoing
# connection holds one of them when a replica binds it.
port=20161
empty_tables
psql "$url" -qc "VACUUM ANALYZE tasks"

mcp_a=20171
start_service --amqp-url none --embedded-workers 0 --mcp-listen "127.0.0.1:$mcp_a"
replica_a=${pids[-1]}
port=$((port + 1))
start_service --amqp-url none --embedded-workers 0 --mcp-listen "127.0.0.1:20172"
sleep 1

echo "== $cycles cycles of $streams session streams + $listeners subscriptions on one replica"
echo "before: RSS $(awk '/^VmRSS/{print $2}' "/proc/$replica_a/status") KiB, $(ls "/proc/$replica_a/fd" | wc -l) fds"
for cycle in $(seq 1 "$cycles"); do
  "$bin/taskstore" bench --endpoint "http://127.0.0.1:$port" --scenario mcp-streams \
    --mcp-url "http://127.0.0.1:$mcp_a/mcp" --service-pid "$replica_a" \
    --streams "$streams" --listeners "$listeners" --rate 200 --duration 1s --clients 8 \
    2>/dev/null > "$out/cycle-$cycle.json"
  sleep 1
  complete=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['streams']['complete'])" "$out/cycle-$cycle.json")
  echo "cycle $cycle: complete $complete; streams closed: RSS $(awk '/^VmRSS/{print $2}' "/proc/$replica_a/status") KiB, $(ls "/proc/$replica_a/fd" | wc -l) fds"
done
echo "reports: $out"
