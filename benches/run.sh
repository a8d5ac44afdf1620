#!/usr/bin/env bash
# Measures taskstore against the limit of the PostgreSQL it runs on, in one
# run on one machine: the same SQL work per task through pgbench, at the same
# concurrency, then the ratios.
#
#   benches/run.sh [clients] [seconds]        (defaults: 64 clients, 10 s)
#   QUEUE_TYPE=classic benches/run.sh ...     (e2e on classic queues; default quorum)
#
# Needs PostgreSQL (127.0.0.1:5432, user postgres) and RabbitMQ (guest) as in
# the README, pgbench, and python3. Uses (and empties) the database
# taskstore_bench.
set -euo pipefail
cd "$(dirname "$0")/.."

clients=${1:-64}
seconds=${2:-10}
. benches/lib.sh
empty_tables

echo "== create, $clients clients, ${seconds}s"
start_service --amqp-url none --embedded-workers 0
"$bin/taskstore" bench --endpoint "$endpoint" --scenario create --clients "$clients" --duration "${seconds}s" > "$out/create.json"
ours=$(figure "$out/create.json" create per_second)
base=$(pgbench_tps create)
echo "taskstore $ours/s (p99 $(figure "$out/create.json" create p99_ms) ms)  pgbench $base/s  ratio $(ratio "$ours" "$base")"

echo "== get, $clients clients, ${seconds}s"
rows=100000
seed "$rows"
"$bin/taskstore" bench --endpoint "$endpoint" --scenario get --clients "$clients" --duration "${seconds}s" --seeded "$rows" > "$out/get.json"
ours=$(figure "$out/get.json" get per_second)
base=$(pgbench_tps get -D rows="$rows")
echo "taskstore $ours/s (p99 $(figure "$out/get.json" get p99_ms) ms)  pgbench $base/s  ratio $(ratio "$ours" "$base")"

echo "== list, pages of 100 over $(psql "$url" -qAtc 'SELECT count(*) FROM tasks') tasks"
"$bin/taskstore" bench --endpoint "$endpoint" --scenario list --clients 4 --duration "${seconds}s" --tasks 0 > "$out/list.json"
echo "first tenth p50 $(figure "$out/list.json" list_page_first_tenth p50_ms) ms, last tenth p50 $(figure "$out/list.json" list_page_last_tenth p50_ms) ms"
stop_service

echo "== memory: 10,000 tasks in flight and 1,000 WatchTask streams, ${seconds}s"
empty_tables
start_service --amqp-url none --embedded-workers 0
service=${pids[-1]}
"$bin/taskstore" bench --endpoint "$endpoint" --scenario watch --clients 16 --duration "${seconds}s" --tasks 10000 --watchers 1000 > "$out/watch.json" &
bench=$!
sleep "$(python3 -c "print(max(1, $seconds * 0.8))")"   # tasks created, streams open, updates flowing
rss=$(awk '/^VmRSS/{print $2}' "/proc/$service/status")
wait "$bench"
peak=$(awk '/^VmHWM/{print $2}' "/proc/$service/status")
echo "service RSS $((rss / 1024)) MiB (peak $((peak / 1024)) MiB; target 150), update→watcher p99 $(figure "$out/watch.json" watch_delivery p99_ms) ms"
stop_service

queue_type=${QUEUE_TYPE:-quorum}
echo "== e2e with two taskworker processes, $clients clients, ${seconds}s, $queue_type queues"
start_service --amqp-url amqp://guest:guest@127.0.0.1:5672/%2f --queue-prefix "bench-$queue_type"
service=${pids[-1]}
workers=()
for n in 1 2; do
  "$bin/taskworker" --endpoint "$endpoint" --queue-prefix "bench-$queue_type" --queue-type "$queue_type" \
    --tools noop,sleep --concurrency 32 --worker-id "bench-$n" --log-level warn &
  pids+=($!)
  workers+=($!)
done
sleep 2
python3 benches/cpu.py snapshot "$out/cpu.json"
"$bin/taskstore" bench --endpoint "$endpoint" --scenario e2e --clients "$clients" --duration "${seconds}s" > "$out/e2e.json"
full=$(figure "$out/e2e.json" create_to_result per_second)
echo "full speed: $full tasks/s, create→worker-start p99 $(figure "$out/e2e.json" create_to_worker_start p99_ms) ms"
python3 benches/cpu.py report "$out/cpu.json" "$(figure "$out/e2e.json" create_to_result count)" \
  taskstore="$service" taskworkers="$(IFS=,; echo "${workers[*]}")"
half=$(python3 -c "print(float('$full') / 2)")
"$bin/taskstore" bench --endpoint "$endpoint" --scenario e2e --clients "$clients" --duration "${seconds}s" --rate "$half" > "$out/e2e-half.json"
echo "at half ($half/s): create→worker-start p99 $(figure "$out/e2e-half.json" create_to_worker_start p99_ms) ms, create→result p99 $(figure "$out/e2e-half.json" create_to_result p99_ms) ms"
slow_clients=128   # twice the 64 worker slots, so that a slot never waits for a client
"$bin/taskstore" bench --endpoint "$endpoint" --scenario e2e --clients "$slow_clients" --duration "${seconds}s" \
  --tool sleep --sleep-ms 50..500 > "$out/e2e-slow.json"
utilisation=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); t=r['operations']['tool_run']
print(f\"{100 * t['count'] * t['mean_ms'] / (r['elapsed_s'] * 1000 * 64):.1f}\")" "$out/e2e-slow.json")
echo "slow tools (50–500 ms), $slow_clients clients: $(figure "$out/e2e-slow.json" create_to_result per_second) tasks/s, worker slot utilisation $utilisation% of 64 slots"
stop_service

echo "== graphile-worker baseline: the same e2e load, two worker processes of 32, no broker, no stored result"
graphile_url="postgres://postgres@127.0.0.1:$pg_port/${db}_graphile?sslmode=disable"
# A fresh database each run, as ours is emptied and vacuumed: no jobs left
# over from an earlier run, no dead rows (this cluster may run without
# autovacuum).
dropdb -h 127.0.0.1 -p "$pg_port" -U postgres --if-exists "${db}_graphile"
createdb -h 127.0.0.1 -p "$pg_port" -U postgres "${db}_graphile"
[ -d benches/graphile/node_modules ] || npm ci --prefix benches/graphile --no-audit --no-fund --silent
node benches/graphile/bench.mjs migrate "$graphile_url"
graphile_workers=()
for n in 1 2; do
  node benches/graphile/bench.mjs worker "$graphile_url" 32 &
  pids+=($!)
  graphile_workers+=($!)
done
sleep 2
python3 benches/cpu.py snapshot "$out/cpu-graphile.json"
node benches/graphile/bench.mjs load "$graphile_url" "$clients" "$seconds" > "$out/graphile.json"
theirs=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['per_second']))" "$out/graphile.json")
echo "graphile-worker $theirs jobs/s (p50 $(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['p50_ms'], 2))" "$out/graphile.json") ms)  taskstore e2e $full/s  ratio $(ratio "$full" "$theirs")"
python3 benches/cpu.py report "$out/cpu-graphile.json" "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['count'])" "$out/graphile.json")" \
  graphile-workers="$(IFS=,; echo "${graphile_workers[*]}")"
echo "reports: $out"
