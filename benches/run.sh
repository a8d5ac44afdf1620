#!/usr/bin/env bash
# Measures taskstore against the limit of the PostgreSQL it runs on, in one
# run on one machine: the same SQL work per task through pgbench, at the same
# concurrency, then the ratios.
#
#   benches/run.sh [clients] [seconds]        (defaults: 64 clients, 10 s)
#
# Needs PostgreSQL (127.0.0.1:5432, user postgres) and RabbitMQ (guest) as in
# the README, pgbench, and python3. Uses (and empties) the database
# taskstore_bench.
set -euo pipefail
cd "$(dirname "$0")/.."

clients=${1:-64}
seconds=${2:-10}
db=${BENCH_DATABASE:-taskstore_bench}
url="postgres://postgres@127.0.0.1:5432/$db"
port=50151
endpoint="http://127.0.0.1:$port"
bin=./target/release

cargo build --release --bin taskstore --bin taskworker
psql -h 127.0.0.1 -U postgres -d postgres -qAtc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1 \
  || createdb -h 127.0.0.1 -U postgres "$db"
"$bin/taskstore" migrate --database-url "$url" >/dev/null
psql "$url" -qc "TRUNCATE tasks, dispatch_outbox"

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

start_service() { # extra serve flags...
  "$bin/taskstore" serve --database-url "$url" --listen "127.0.0.1:$port" --cleanup-interval off \
    --db-max-connections 20 --log-level warn "$@" &
  pids+=($!)
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return; sleep 0.1; done
  echo "taskstore did not start" >&2; exit 1
}
stop_service() { cleanup; pids=(); sleep 1; }
figure() { # report-json operation field
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['operations'][sys.argv[2]][sys.argv[3]])" "$@"
}
tps() { awk '/^tps = /{print $3; exit}'; }
ratio() { python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$1" "$2"; }
out=$(mktemp -d)

echo "== create, $clients clients, ${seconds}s"
start_service --amqp-url none --embedded-workers 0
"$bin/taskstore" bench --endpoint "$endpoint" --scenario create --clients "$clients" --duration "${seconds}s" > "$out/create.json"
ours=$(figure "$out/create.json" create per_second)
base=$(pgbench -h 127.0.0.1 -U postgres -n -c "$clients" -j 2 -T "$seconds" -f benches/pgbench/create.sql "$db" 2>/dev/null | tps)
echo "taskstore $ours/s (p99 $(figure "$out/create.json" create p99_ms) ms)  pgbench $base/s  ratio $(ratio "$ours" "$base")"

echo "== get, $clients clients, ${seconds}s"
rows=100000
psql "$url" -qv rows="$rows" -f benches/pgbench/seed.sql
"$bin/taskstore" bench --endpoint "$endpoint" --scenario get --clients "$clients" --duration "${seconds}s" --tasks 10000 > "$out/get.json"
ours=$(figure "$out/get.json" get per_second)
base=$(pgbench -h 127.0.0.1 -U postgres -n -c "$clients" -j 2 -T "$seconds" -D rows="$rows" -f benches/pgbench/get.sql "$db" 2>/dev/null | tps)
echo "taskstore $ours/s (p99 $(figure "$out/get.json" get p99_ms) ms)  pgbench $base/s  ratio $(ratio "$ours" "$base")"

echo "== list, pages of 100 over $(psql "$url" -qAtc 'SELECT count(*) FROM tasks') tasks"
"$bin/taskstore" bench --endpoint "$endpoint" --scenario list --clients 4 --duration "${seconds}s" --tasks 0 > "$out/list.json"
echo "first tenth p50 $(figure "$out/list.json" list_page_first_tenth p50_ms) ms, last tenth p50 $(figure "$out/list.json" list_page_last_tenth p50_ms) ms"
stop_service

echo "== e2e with two taskworker processes, $clients clients, ${seconds}s"
start_service --amqp-url amqp://guest:guest@127.0.0.1:5672/%2f --queue-prefix bench
for n in 1 2; do
  "$bin/taskworker" --endpoint "$endpoint" --queue-prefix bench --tools noop --concurrency 32 --worker-id "bench-$n" --log-level warn &
  pids+=($!)
done
sleep 2
"$bin/taskstore" bench --endpoint "$endpoint" --scenario e2e --clients "$clients" --duration "${seconds}s" > "$out/e2e.json"
full=$(figure "$out/e2e.json" create_to_result per_second)
echo "full speed: $full tasks/s, create→worker-start p99 $(figure "$out/e2e.json" create_to_worker_start p99_ms) ms"
half=$(python3 -c "print(float('$full') / 2)")
"$bin/taskstore" bench --endpoint "$endpoint" --scenario e2e --clients "$clients" --duration "${seconds}s" --rate "$half" > "$out/e2e-half.json"
echo "at half ($half/s): create→worker-start p99 $(figure "$out/e2e-half.json" create_to_worker_start p99_ms) ms, create→result p99 $(figure "$out/e2e-half.json" create_to_result p99_ms) ms"
echo "reports: $out"
