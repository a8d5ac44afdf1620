#!/usr/bin/env bash
# What the MCP endpoint costs: synchronous MCP `tools/call`s of the no-op
# tool through `/mcp` against the same work over gRPC (`e2e`: CreateTask with
# dispatch, then a waiting GetTaskResult), on one service with two taskworker
# processes, at the same concurrency, alternating so that a change in the
# (shared) machine hits both.
#
#   benches/mcp.sh [clients] [seconds] [rounds]   (defaults: 64, 10, 2)
#
# Needs what benches/run.sh needs (PostgreSQL, RabbitMQ, python3).
set -euo pipefail
cd "$(dirname "$0")/.."

clients=${1:-64}
seconds=${2:-10}
rounds=${3:-2}
. benches/lib.sh
empty_tables
mcp_port=50152
mcp_url="http://127.0.0.1:$mcp_port/mcp"

start_service --amqp-url amqp://guest:guest@127.0.0.1:5672/%2f --queue-prefix bench-mcp \
  --mcp-listen "127.0.0.1:$mcp_port"
service=${pids[-1]}
workers=()
for n in 1 2; do
  "$bin/taskworker" --endpoint "$endpoint" --queue-prefix bench-mcp --tools noop \
    --concurrency 32 --worker-id "bench-mcp-$n" --log-level warn &
  pids+=($!)
  workers+=($!)
done
cpu() { # report-json operation: CPU per operation by process group ("other" holds the load generator)
  python3 benches/cpu.py report "$out/cpu.json" "$(figure "$1" "$2" count)" \
    taskstore="$service" taskworkers="$(IFS=,; echo "${workers[*]}")"
}
sleep 2

echo "== $clients clients, ${seconds}s each, $rounds rounds (gRPC e2e, then MCP tools/call)"
for round in $(seq 1 "$rounds"); do
  python3 benches/cpu.py snapshot "$out/cpu.json"
  "$bin/taskstore" bench --endpoint "$endpoint" --scenario e2e --clients "$clients" \
    --duration "${seconds}s" > "$out/grpc-$round.json"
  echo "gRPC cpu per task: $(cpu "$out/grpc-$round.json" create_to_result)"
  empty_tables   # each run starts on empty tables (autovacuum may be off)
  python3 benches/cpu.py snapshot "$out/cpu.json"
  "$bin/taskstore" bench --endpoint "$endpoint" --scenario mcp-call --mcp-url "$mcp_url" \
    --clients "$clients" --duration "${seconds}s" > "$out/mcp-$round.json"
  echo "MCP cpu per call: $(cpu "$out/mcp-$round.json" mcp_call)"
  grpc=$(figure "$out/grpc-$round.json" create_to_result per_second)
  mcp=$(figure "$out/mcp-$round.json" mcp_call per_second)
  echo "round $round: gRPC $grpc tasks/s (p50 $(figure "$out/grpc-$round.json" create_to_result p50_ms) ms, p99 $(figure "$out/grpc-$round.json" create_to_result p99_ms) ms)  MCP $mcp calls/s (p50 $(figure "$out/mcp-$round.json" mcp_call p50_ms) ms, p99 $(figure "$out/mcp-$round.json" mcp_call p99_ms) ms)  ratio $(ratio "$mcp" "$grpc")"
  empty_tables
done
echo "reports: $out"
