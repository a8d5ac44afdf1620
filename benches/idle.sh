#!/usr/bin/env bash
# What running tasks cost while they do nothing (issue 41's measure): TASKS
# tasks of TOOL run at once on WORKERS workers, and for SECONDS the script
# counts the CPU of the service, the workers, PostgreSQL and RabbitMQ (as a
# share of one core), PostgreSQL's commits and row updates per second
# (pg_stat_database), and the workers' memory per running task (RSS with the
# tasks less RSS before them).
#
#   benches/idle.sh [tasks] [workers] [seconds]   (defaults: 2000, 2, 30)
#   TOOL=sleep benches/idle.sh ...   (`sleep`: progress every second; default
#                                     `noop`, which waits silently)
#   LANGUAGE=python benches/idle.sh ...       (or typescript: the workers are the
#                                     worker library's conformance workers, and the
#                                     tool `conf_noop`, which waits silently too)
#
# Its own database (taskstore_bench_idle) and port (50181). Needs what
# benches/run.sh needs (PostgreSQL, RabbitMQ, python3).
set -euo pipefail
cd "$(dirname "$0")/.."

tasks=${1:-2000}
workers=${2:-2}
seconds=${3:-30}
language=${LANGUAGE:-rust}
case $language in
  rust) tool=${TOOL:-noop} ;;
  python | typescript) tool=${TOOL:-conf_noop}; worker/tests/conformance/build-workers ;;
  *) echo "idle: LANGUAGE is rust, python or typescript, not $language" >&2; exit 2 ;;
esac
slots=$(((tasks + workers - 1) / workers))
export BENCH_DATABASE=${BENCH_DATABASE:-taskstore_bench_idle}
. benches/lib.sh
port=50181
endpoint="http://127.0.0.1:$port"
amqp=amqp://guest:guest@127.0.0.1:5672/%2f
prefix=bench-idle

empty_tables
psql "$url" -qc "VACUUM ANALYZE tasks, dispatch_outbox"
start_service --amqp-url "$amqp" --queue-prefix "$prefix"
service=${pids[-1]}
worker_pids=()
for n in $(seq 1 "$workers"); do
  flags=(--endpoint "$endpoint" --amqp-url "$amqp" --queue-prefix "$prefix"
    --concurrency "$slots" --worker-id "bench-idle-$n" --log-level warn)
  case $language in
    rust) "$bin/taskworker" "${flags[@]}" --tools noop,sleep & ;;
    python) clients/python/.venv/bin/mcp-taskstore-worker mcp_taskstore.conformance:tools "${flags[@]}" & ;;
    typescript) node clients/typescript/dist/worker/cli.js "$PWD/clients/typescript/dist/worker/conformance.js" "${flags[@]}" & ;;
  esac
  worker_pids+=($!)
  pids+=($!)
done
"$bin/taskstore" status --endpoint "$endpoint" --tool "$tool" --wait 30s --log-level warn >/dev/null
sleep 2 # their consumers, after their first heartbeats

rss_kib() { # pids...: their resident memory in all, KiB
  local total=0 pid
  for pid in "$@"; do total=$((total + $(awk '/^VmRSS/{print $2}' "/proc/$pid/status"))); done
  echo "$total"
}
rss_before=$(rss_kib "${worker_pids[@]}")

# Half an hour each: they run for the whole measurement.
"$bin/taskstore" bench --endpoint "$endpoint" --scenario fill --tool "$tool" \
  --sleep-ms 1800000..1800000 --count "$tasks" --clients 16 --duration 600s >"$out/fill.json"
running() { psql "$url" -qAtc "SELECT count(*) FROM tasks WHERE status = 'working' AND lease_token IS NOT NULL"; }
for _ in $(seq 1 600); do
  [ "$(running)" -ge "$tasks" ] && break
  sleep 0.5
done
now_running=$(running)
if [ "$now_running" -lt "$tasks" ]; then
  echo "idle: only $now_running of $tasks tasks run after 5 minutes" >&2
  exit 1
fi
sleep 5 # past the first renewals of the last ones started

pg_counters() { psql "$url" -qAtc "SELECT xact_commit, tup_updated FROM pg_stat_database WHERE datname = current_database()"; }
before=$(pg_counters)
python3 benches/cpu.py snapshot "$out/idle.cpu"
sleep "$seconds"
python3 benches/cpu.py report "$out/idle.cpu" 1 service="$service" \
  workers="$(IFS=,; echo "${worker_pids[*]}")" >"$out/idle.txt"
after=$(pg_counters)
rss_after=$(rss_kib "${worker_pids[@]}")

python3 - "$out/idle.txt" "$seconds" "$before" "$after" "$rss_before" "$rss_after" "$now_running" "$tool" "$language" <<'PY'
import re, sys
text, seconds = open(sys.argv[1]).read(), float(sys.argv[2])
before, after = [list(map(int, v.split("|"))) for v in sys.argv[3:5]]
rss_before, rss_after, running, tool, language = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), sys.argv[8], sys.argv[9]
share = {name: float(ms) / (seconds * 1000) * 100 for name, ms in re.findall(r"(\w+) ([0-9.]+) ms", text)}
print(f"{running} running tasks of {tool} ({language} workers), {seconds:.0f} s:")
print("  cpu, % of one core: " + ", ".join(f"{name} {pct:.1f}" for name, pct in share.items() if name != "total")
      + f"; total {share.get('total', 0):.1f}")
print(f"  postgres: {(after[0] - before[0]) / seconds:.0f} commits/s, {(after[1] - before[1]) / seconds:.0f} rows updated/s")
print(f"  workers' memory: {(rss_after - rss_before) / max(running, 1):.1f} KiB per running task "
      f"({rss_before // 1024} MiB before, {rss_after // 1024} MiB with them)")
m = re.search(r"([0-9.]+) s stolen", text)
print(f"  {m.group(1) if m else '?'} s stolen by the hypervisor")
PY
