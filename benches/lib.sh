# Shared by run.sh and scale.sh: the bench database, the service under test,
# and how figures are read. Source it from the repository root.

db=${BENCH_DATABASE:-taskstore_bench}
# BENCH_PG_PORT: another PostgreSQL on this machine (soak.sh's own cluster).
pg_port=${BENCH_PG_PORT:-5432}
# Plain TCP on loopback for every client of the database (the service,
# pgbench, graphile-worker's node-postgres, whose default it is), so that the
# baselines do the same transport work as we do. TLS to PostgreSQL costs the
# e2e path about 10% of its CPU here (BENCHMARKS.md, issue 28 second pass).
export PGSSLMODE=disable
url="postgres://postgres@127.0.0.1:$pg_port/$db?sslmode=disable"
port=50151
endpoint="http://127.0.0.1:$port"
# BENCH_BIN: the binaries to run (a debug build, for a smoke run of a script).
bin=${BENCH_BIN:-./target/release}

# BENCH_NO_BUILD=1: use the release binaries already in target/release.
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release --bin taskstore --bin taskworker
psql -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres -qAtc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1 \
  || createdb -h 127.0.0.1 -p "$pg_port" -U postgres "$db"
"$bin/taskstore" migrate --database-url "$url" >/dev/null

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

start_service() { # extra serve flags...
  "$bin/taskstore" serve --auth none --database-url "$url" --listen "127.0.0.1:$port" \
    --cleanup-interval "${cleanup_interval:-off}" \
    --db-max-connections 20 --log-level warn "$@" &
  pids+=($!)
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return; sleep 0.1; done
  echo "taskstore did not start" >&2; exit 1
}
stop_service() { cleanup; pids=(); sleep 1; }
empty_tables() { psql "$url" -qc "TRUNCATE tasks, dispatch_outbox CASCADE"; }   # CASCADE: task_input_requests (0011)
seed() { # rows: tasks bench-1 .. bench-<rows>, as benches/pgbench/get.sql reads them
  psql "$url" -qv rows="$1" -f benches/pgbench/seed.sql
  psql "$url" -qc "VACUUM ANALYZE tasks"
}
pgbench_tps() { # script [pgbench options...]
  local script=$1; shift
  pgbench -h 127.0.0.1 -p "$pg_port" -U postgres -n -c "$clients" -j 2 -T "$seconds" "$@" -f "benches/pgbench/$script.sql" "$db" 2>/dev/null | tps
}
figure() { # report-json operation field: rates as whole numbers, latencies to 0.01 ms
  python3 -c "import json,sys; v=json.load(open(sys.argv[1]))['operations'][sys.argv[2]][sys.argv[3]]; print(round(v) if v >= 100 else round(v, 2))" "$@"
}
tps() { awk '/^tps = /{print $3; exit}'; }
ratio() { python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$1" "$2"; }
out=$(mktemp -d)
