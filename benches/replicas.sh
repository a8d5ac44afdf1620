#!/usr/bin/env bash
# Scaling check: e2e through one service replica and two workers, then through
# several replicas and more workers (same total worker slots, same clients,
# clients split evenly over the replicas, no sticky routing of anything), and
# after each run checks in PostgreSQL that every task created completed, and
# that none was claimed twice.
#
#   benches/replicas.sh [replicas] [workers] [clients] [seconds]
#                       (defaults: 2 replicas, 4 workers, 64 clients, 10 s)
#
# Needs what benches/run.sh needs. Uses (and empties) the database
# taskstore_bench.
set -euo pipefail
cd "$(dirname "$0")/.."

replicas=${1:-2}
workers=${2:-4}
clients=${3:-64}
seconds=${4:-10}
slots=64
. benches/lib.sh
first_port=$port

run() { # name replicas workers
  local name=$1 n_replicas=$2 n_workers=$3
  empty_tables
  local endpoints=() services=() worker_pids=()
  for r in $(seq 0 $((n_replicas - 1))); do
    port=$((first_port + r))
    start_service --amqp-url amqp://guest:guest@127.0.0.1:5672/%2f --queue-prefix bench-replicas
    services+=("${pids[-1]}")
    endpoints+=("http://127.0.0.1:$port")
  done
  port=$first_port
  for w in $(seq 0 $((n_workers - 1))); do
    "$bin/taskworker" --endpoint "${endpoints[$((w % n_replicas))]}" --queue-prefix bench-replicas \
      --tools noop --concurrency $((slots / n_workers)) --worker-id "bench-$w" --log-level warn &
    pids+=($!)
    worker_pids+=($!)
  done
  sleep 2
  echo "== e2e, $n_replicas replica(s), $n_workers workers ($((slots / n_workers)) slots each), $clients clients, ${seconds}s"
  python3 benches/cpu.py snapshot "$out/cpu.json"
  local benches=()
  for r in $(seq 0 $((n_replicas - 1))); do
    "$bin/taskstore" bench --endpoint "${endpoints[$r]}" --scenario e2e --clients $((clients / n_replicas)) \
      --duration "${seconds}s" > "$out/e2e-$r.json" &
    benches+=($!)
  done
  wait "${benches[@]}"
  local total=0 count=0
  for r in $(seq 0 $((n_replicas - 1))); do
    total=$(python3 -c "print($total + $(figure "$out/e2e-$r.json" create_to_result per_second))")
    count=$((count + $(figure "$out/e2e-$r.json" create_to_result count)))
  done
  echo "full speed: $total tasks/s"
  python3 benches/cpu.py report "$out/cpu.json" "$count" \
    taskstore="$(IFS=,; echo "${services[*]}")" taskworkers="$(IFS=,; echo "${worker_pids[*]}")"
  # Tasks whose clients gave up at the deadline finish after it: wait for them.
  for _ in $(seq 1 60); do
    [ "$(psql "$url" -qAtc "SELECT count(*) FROM tasks WHERE status = 'working'")" = 0 ] && break
    sleep 0.5
  done
  psql "$url" -qAt -F ' ' -c "SELECT 'tasks', count(*), 'completed', count(*) FILTER (WHERE status = 'completed'),
      'not completed', count(*) FILTER (WHERE status <> 'completed'),
      'claimed more than once', count(*) FILTER (WHERE attempt > 1),
      'jobs left in the outbox', (SELECT count(*) FROM dispatch_outbox) FROM tasks"
  stop_service
  echo "$total" > "$out/rate-$name"
}

run baseline 1 2
run scaled "$replicas" "$workers"
echo "ratio ($replicas replicas, $workers workers : 1 replica, 2 workers): $(ratio "$(cat "$out/rate-scaled")" "$(cat "$out/rate-baseline")")"
