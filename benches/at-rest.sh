#!/usr/bin/env bash
# Tasks at rest (issue 41, item 5): TASKS dispatched tasks wait for a tool
# whose only worker is gone, and for SECONDS the script counts what the
# service and PostgreSQL do meanwhile: CPU (a share of one core), commits per
# second, and the rows read from `tasks` and `dispatch_outbox` per second
# (sequential reads and index entries read, from pg_stat_user_tables and
# pg_stat_user_indexes; a backend reports them within about 10 s, alike at
# both ends of the window). Nothing is due, so the
# periodic passes (reaper, relay, sweeper, metrics snapshot) should read
# almost nothing, whatever TASKS is.
#
#   benches/at-rest.sh [tasks] [seconds]   (defaults: 100000, 60)
#   BENCH_BIN=dir BENCH_DATABASE=name benches/at-rest.sh ...   (another build, on a
#                                          database of its own: their migrations differ)
#   METRICS=off benches/at-rest.sh ...     (no metrics, so no snapshot)
#
# The service runs with its production defaults for the periodic passes
# (reaper, relay, `--cleanup-interval 1m`) and metrics on, so the snapshot
# (`--metrics-snapshot-interval`, 30 s, which counts the tasks by status and
# the waiting jobs) runs too. Its own port (50191) and
# queue prefix. Needs what benches/run.sh needs (PostgreSQL, RabbitMQ, python3).
set -euo pipefail
cd "$(dirname "$0")/.."

tasks=${1:-100000}
seconds=${2:-60}
export BENCH_DATABASE=${BENCH_DATABASE:-taskstore_bench_rest}
cleanup_interval=1m
. benches/lib.sh
port=50191
endpoint="http://127.0.0.1:$port"
amqp=amqp://guest:guest@127.0.0.1:5672/%2f
prefix=bench-rest
tool=noop

empty_tables
metrics=(--metrics-listen 127.0.0.1:50192)
[ "${METRICS:-on}" = off ] && metrics=()
start_service --amqp-url "$amqp" --queue-prefix "$prefix" "${metrics[@]}"
service=${pids[-1]}
# A worker makes the tool known, then goes: the tasks wait in the outbox
# (and, up to the queue's room, in RabbitMQ), none is running.
"$bin/taskworker" --endpoint "$endpoint" --amqp-url "$amqp" --queue-prefix "$prefix" \
  --tools "$tool" --concurrency 1 --worker-id bench-rest --log-level warn &
worker=$!
"$bin/taskstore" status --endpoint "$endpoint" --tool "$tool" --wait 30s --log-level warn >/dev/null
kill -TERM "$worker"
wait "$worker" 2>/dev/null || true

echo "at-rest: creating $tasks tasks of $tool with no worker" >&2
"$bin/taskstore" bench --endpoint "$endpoint" --scenario fill --tool "$tool" \
  --count "$tasks" --clients 16 --duration 1200s >"$out/fill.json"
psql "$url" -qc "VACUUM ANALYZE tasks, dispatch_outbox"
waiting=$(psql "$url" -qAtc "SELECT count(*) FROM tasks WHERE status = 'working'")
sleep 35 # past a metrics snapshot and the passes' first rounds after the creates

pg_counters() { # commits | rows read from tasks | from dispatch_outbox: sequential reads and index entries
  psql "$url" -qAtc "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())
      || '|' || (SELECT COALESCE(sum(seq_tup_read), 0) FROM pg_stat_user_tables WHERE relname = 'tasks')
             + (SELECT COALESCE(sum(idx_tup_read), 0) FROM pg_stat_user_indexes WHERE relname = 'tasks')
      || '|' || (SELECT COALESCE(sum(seq_tup_read), 0) FROM pg_stat_user_tables WHERE relname = 'dispatch_outbox')
             + (SELECT COALESCE(sum(idx_tup_read), 0) FROM pg_stat_user_indexes WHERE relname = 'dispatch_outbox')"
}
before=$(pg_counters)
python3 benches/cpu.py snapshot "$out/rest.cpu"
sleep "$seconds"
python3 benches/cpu.py report "$out/rest.cpu" 1 service="$service" >"$out/rest.txt"
after=$(pg_counters)
read -r outbox_rows < <(psql "$url" -qAtc "SELECT count(*) FROM dispatch_outbox")

python3 - "$out/rest.txt" "$seconds" "$before" "$after" "$waiting" "$outbox_rows" "$bin" "${METRICS:-on}" <<'PY'
import re, sys
text, seconds = open(sys.argv[1]).read(), float(sys.argv[2])
before, after = [list(map(int, v.split("|"))) for v in sys.argv[3:5]]
waiting, outbox, bin, metrics = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7], sys.argv[8]
share = {name: float(ms) / (seconds * 1000) * 100 for name, ms in re.findall(r"(\w+) ([0-9.]+) ms", text)}
print(f"{waiting} tasks at rest ({outbox} jobs in the outbox), {seconds:.0f} s, {bin}, metrics {metrics}:")
print("  cpu, % of one core: " + ", ".join(f"{name} {pct:.1f}" for name, pct in share.items() if name != "total")
      + f"; total {share.get('total', 0):.1f}")
print(f"  postgres: {(after[0] - before[0]) / seconds:.1f} commits/s; rows read per second: "
      f"tasks {(after[1] - before[1]) / seconds:.0f}, dispatch_outbox {(after[2] - before[2]) / seconds:.0f}")
PY
