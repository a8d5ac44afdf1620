#!/usr/bin/env bash
# What a poll costs (issue 41, item 4): ROWS tasks read through GetTask by 64
# clients at RATE reads per second in all for SECONDS, as MCP clients poll
# `tasks/get` at their poll interval (10,000 tasks every 5 s: 2,000/s). It
# reports the CPU of the service and of PostgreSQL per poll (cpu.py), then
# the same clients as fast as they can against pgbench's single-row select
# on the same rows, in the same run.
#
#   benches/polls.sh [rows] [rate] [seconds]   (defaults: 10000, 2000, 30)
#
# Its own database (taskstore_bench_polls). Needs what benches/run.sh needs.
set -euo pipefail
cd "$(dirname "$0")/.."

rows=${1:-10000}
rate=${2:-2000}
seconds=${3:-30}
clients=64
export BENCH_DATABASE=${BENCH_DATABASE:-taskstore_bench_polls}
. benches/lib.sh

empty_tables
seed "$rows"
start_service --amqp-url none --embedded-workers 0
service=${pids[-1]}

echo "== $rows tasks polled at $rate/s by $clients clients, ${seconds}s"
python3 benches/cpu.py snapshot "$out/polls.cpu"
"$bin/taskstore" bench --endpoint "$endpoint" --scenario get --clients "$clients" \
  --duration "${seconds}s" --seeded "$rows" --rate "$rate" >"$out/polls.json"
polls=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['operations']['get']['count'])" "$out/polls.json")
echo "$polls polls ($(figure "$out/polls.json" get per_second)/s, p99 $(figure "$out/polls.json" get p99_ms) ms); CPU per poll:"
python3 benches/cpu.py report "$out/polls.cpu" "$polls" service="$service"

echo "== get, $clients clients as fast as they can, ${seconds}s"
"$bin/taskstore" bench --endpoint "$endpoint" --scenario get --clients "$clients" \
  --duration "${seconds}s" --seeded "$rows" >"$out/get.json"
ours=$(figure "$out/get.json" get per_second)
base=$(pgbench_tps get -D rows="$rows")
echo "taskstore $ours/s (p99 $(figure "$out/get.json" get p99_ms) ms)  pgbench $base/s  ratio $(ratio "$ours" "$base")"
