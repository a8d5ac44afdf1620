# What ab-e2e.sh, ab-store.sh and ab-graphile.sh share: the processes a run
# started (killed on exit), each side's database and service, one e2e run,
# and how its figures are read. Source it after `cd` to the checkout, with
# $port set.

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap cleanup EXIT

# A side's database (taskstore_bench_<side>), made anew so that no index or
# setting from an earlier run's AB_SQL is left, migrated by that side's
# build; then AB_SQL_A / AB_SQL_B, if set, is run on it.
prepare() { # side bin
  local db="taskstore_bench_$1"
  dropdb -h 127.0.0.1 -U postgres --if-exists "$db"
  createdb -h 127.0.0.1 -U postgres "$db"
  "$2/taskstore" migrate --database-url "postgres://postgres@127.0.0.1:5432/$db" >/dev/null
  local sql_var="AB_SQL_${1^^}"
  if [[ -n "${!sql_var:-}" ]]; then psql -h 127.0.0.1 -U postgres -d "$db" -qc "${!sql_var}"; fi
}

# Prepares both sides, then calls `run side bin round` for each round, in
# the order AB, BA, AB, … so that drift on the machine falls on both alike.
alternate() { # rounds (uses $a and $b, the bin dirs)
  prepare a "$a"; prepare b "$b"
  for round in $(seq 1 "$1"); do
    if (( round % 2 )); then run a "$a" "$round"; run b "$b" "$round"; else run b "$b" "$round"; run a "$a" "$round"; fi
  done
}

# Plain TCP, as run.sh (benches/lib.sh) measures.
side_url() { echo "postgres://postgres@127.0.0.1:5432/taskstore_bench_$1?sslmode=disable"; }

# Empties a side's tables and starts its `serve` on $port with the flags
# both scripts use plus "$@", then waits until it listens.
serve_side() { # side bin [serve flags...]
  local url; url=$(side_url "$1")
  local bin=$2; shift 2
  psql "$url" -qc "TRUNCATE tasks, dispatch_outbox CASCADE" -c "VACUUM ANALYZE tasks" 2>/dev/null
  "$bin/taskstore" serve --auth none --database-url "$url" --listen "127.0.0.1:$port" \
    --cleanup-interval off --db-max-connections 20 "$@" &
  pids+=($!)
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return; sleep 0.1; done
  echo "taskstore did not start on $port" >&2; exit 1
}

# A figure of a JSON report (a Python subscript), rates as whole numbers.
json_figure() { # report-json subscript
  python3 -c "import json,sys; v=json.load(open(sys.argv[1]))$2; print(round(v) if isinstance(v, float) else v)" "$1"
}
# The total CPU per task (ms) of a `cpu.py report`.
total_cpu() { sed -n 's/.*total \([0-9.]*\) ms.*/\1/p' "$1"; }

# One e2e run of a build: serve_side on queues of `queue_type` (the prefix
# names the type: a queue's type cannot change once declared), two
# `taskworker --concurrency 32` serving the no-op tool, then `taskstore
# bench --scenario e2e` from `loadgen` (a bin dir: the same load generator
# for both sides) with "$@" as extra bench flags, and CPU per task from
# /proc (the service, the workers, PostgreSQL, RabbitMQ, and the rest:
# mostly the load generator). Writes $out/<name>.json, its progress to $out/<name>.log, and
# $out/cpu-<name>.txt. Uses $clients and $seconds.
e2e_run() { # side bin queue_type loadgen name [bench flags...]
  local side=$1 bin=$2 queue_type=$3 loadgen=$4 name=$5; shift 5
  local prefix="ab-$side-$queue_type"
  serve_side "$side" "$bin" --amqp-url amqp://guest:guest@127.0.0.1:5672/%2f \
    --queue-prefix "$prefix" --queue-type "$queue_type" --log-level warn
  local service=${pids[-1]} workers=()
  for n in 1 2; do
    "$bin/taskworker" --endpoint "$endpoint" --queue-prefix "$prefix" --queue-type "$queue_type" \
      --tools noop --concurrency 32 --worker-id "ab-$side-$n" --log-level warn &
    pids+=($!)
    workers+=($!)
  done
  sleep 2
  python3 benches/cpu.py snapshot "$out/cpu-$name.json"
  "$loadgen/taskstore" bench --endpoint "$endpoint" --scenario e2e --clients "$clients" \
    --duration "${seconds}s" "$@" > "$out/$name.json" 2> "$out/$name.log"
  python3 benches/cpu.py report "$out/cpu-$name.json" \
    "$(json_figure "$out/$name.json" "['operations']['create_to_result']['count']")" \
    "service=$service" "workers=${workers[0]},${workers[1]}" > "$out/cpu-$name.txt"
  cleanup
  sleep 1
}
