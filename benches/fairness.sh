#!/usr/bin/env bash
# The noisy neighbour as a benchmark (issue 40): one tenant floods a tool of
# `slots` slots with tasks of TASK_MS (50 ms); meanwhile `quiet` other tenants
# (99: a hundred tenants in all) each create a task, wait for it, and create the
# next, `rate` a second together. Reported: the quiet tenants' create→worker
# start (p50, p99, worst), how much of the flood still waited when they stopped
# (it must: else nothing was measured), and the CPU per task of the service,
# the worker, PostgreSQL and RabbitMQ until the flood drained, against an
# uncontended run of as many tasks (8 clients, each waiting for its task: no
# backlog, every job straight to the queue) on the same service and worker.
#
#   benches/fairness.sh [flood] [quiet] [rate] [seconds] [slots]   (defaults: 4000, 99, 10, 20, 8)
#
# Its own database (taskstore_bench_fairness) and port (50171). Needs what
# benches/run.sh needs (PostgreSQL, RabbitMQ, python3).
set -euo pipefail
cd "$(dirname "$0")/.."

flood=${1:-4000}
quiet=${2:-99}
rate=${3:-10}
seconds=${4:-20}
slots=${5:-8}
ms=${TASK_MS:-50}
export BENCH_DATABASE=${BENCH_DATABASE:-taskstore_bench_fairness}
. benches/lib.sh
port=50171
endpoint="http://127.0.0.1:$port"
amqp=amqp://guest:guest@127.0.0.1:5672/%2f
prefix=bench-fairness

empty_tables
start_service --amqp-url "$amqp" --queue-prefix "$prefix"
service=${pids[-1]}
"$bin/taskworker" --endpoint "$endpoint" --amqp-url "$amqp" --queue-prefix "$prefix" \
  --tools noop --concurrency "$slots" --worker-id bench-fairness --log-level warn &
worker=$!
pids+=("$worker")
"$bin/taskstore" status --endpoint "$endpoint" --tool noop --wait 30s --log-level warn >/dev/null
sleep 2 # its consumer, after its first heartbeat

measure() { # name, bench flags...: the run, then its CPU per task once every task ended
  local name=$1
  shift
  empty_tables
  python3 benches/cpu.py snapshot "$out/$name.cpu"
  "$bin/taskstore" bench --endpoint "$endpoint" --tool noop --sleep-ms "$ms..$ms" "$@" >"$out/$name.json"
  until [ "$(psql "$url" -qAtc "SELECT count(*) FROM tasks WHERE status = 'working'")" = 0 ]; do sleep 0.5; done
  local tasks
  tasks=$(psql "$url" -qAtc "SELECT count(*) FROM tasks WHERE status = 'completed'")
  python3 benches/cpu.py report "$out/$name.cpu" "$tasks" service="$service" worker="$worker" | tee "$out/$name.cpu.txt"
}

echo "== uncontended: $flood tasks of $ms ms from 8 clients, each waiting for its task ($slots slots)"
measure uncontended --scenario e2e --clients 8 --count "$flood" --duration 600s
echo "== fairness: tenant noisy creates $flood tasks of $ms ms, then $quiet quiet tenants create $rate/s for ${seconds}s"
measure fairness --scenario fairness --flood "$flood" --clients "$quiet" --rate "$rate" --duration "${seconds}s"
left=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['flood_left'])" "$out/fairness.json")
echo "quiet tenants, create→worker start: p50 $(figure "$out/fairness.json" quiet_create_to_worker_start p50_ms) ms," \
  "p99 $(figure "$out/fairness.json" quiet_create_to_worker_start p99_ms) ms," \
  "worst $(figure "$out/fairness.json" quiet_create_to_worker_start max_ms) ms" \
  "over $(figure "$out/fairness.json" quiet_create_to_worker_start count) tasks (3 × the tool: $((3 * ms)) ms)"
echo "the flood: $left of $flood still unfinished when the quiet tenants stopped"
echo "uncontended create→worker start: p50 $(figure "$out/uncontended.json" create_to_worker_start p50_ms) ms, p99 $(figure "$out/uncontended.json" create_to_worker_start p99_ms) ms"
if [ "$left" = 0 ]; then
  echo "fairness: the flood drained before the quiet tenants stopped; nothing was measured behind it (a bigger flood)" >&2
  exit 1
fi
