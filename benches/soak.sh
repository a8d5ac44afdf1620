#!/usr/bin/env bash
# Sustained load: dispatched tasks at a fixed rate for a while, reported per
# interval, to see whether the rate and the latency hold and what the tables,
# the processes and the queue do meanwhile.
#
#   benches/soak.sh RATE MINUTES [vacuum|novacuum|production] [INTERVAL_SECONDS]
#       (defaults: 400 tasks/s, 10 minutes, vacuum, 60 s intervals)
#
# `vacuum` runs VACUUM on the hot tables every 30 s, as autovacuum does on a
# production database (this machine's PostgreSQL runs with autovacuum off);
# `novacuum` leaves them alone, to measure what happens when nobody vacuums;
# `production` runs on a PostgreSQL cluster of its own (initdb in a scratch
# directory, its own port, stopped by PID at the end) configured as
# production ones are: autovacuum on with its defaults, fsync and
# synchronous commit on, shared_buffers 25% of a 4 GiB budget, checksums.
# Tasks have a 5-minute ttl and the service's cleanup runs every minute, so
# the tables reach a steady size. Same database and binaries as run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

rate=${1:-400}
minutes=${2:-10}
mode=${3:-vacuum}
interval=${4:-60}
case $mode in vacuum | novacuum | production) ;; *) echo "mode is vacuum, novacuum or production" >&2; exit 2 ;; esac
if [[ $mode == production ]]; then
  . benches/own-postgres.sh
  own_postgres_start
fi
. benches/lib.sh
# lib.sh's exit trap stops the processes; the cluster's stops them first.
if [[ $mode == production ]]; then trap own_postgres_stop EXIT; fi
empty_tables
psql "$url" -qc "VACUUM FULL tasks, dispatch_outbox" -c "SELECT pg_stat_reset()" >/dev/null
prefix="soak$$"

cleanup_interval=1m start_service --amqp-url amqp://guest:guest@127.0.0.1:5672/%2f \
  --queue-prefix "$prefix" --default-ttl 5m
service=${pids[-1]}
workers=()
for n in 1 2; do
  "$bin/taskworker" --endpoint "$endpoint" --queue-prefix "$prefix" --tools noop --concurrency 32 \
    --worker-id "soak-$n" --log-level warn &
  pids+=($!)
  workers+=($!)
done
if [[ $mode == vacuum ]]; then
  (while sleep 30; do psql "$url" -qc "VACUUM tasks" -c "VACUUM dispatch_outbox" >/dev/null 2>&1 || true; done) &
  pids+=($!)
fi
sleep 2

postgres_pids() { # the processes of the PostgreSQL under test
  if [[ -n "${own_postgres_pid:-}" ]]; then
    echo "$own_postgres_pid" $(pgrep -P "$own_postgres_pid" || true)
  else
    pgrep -u postgres -x postgres || true
  fi
}
rss_mib() { # pids...: their summed resident set, MiB
  local kib=0 pid
  for pid in "$@"; do
    kib=$((kib + $(awk '/^VmRSS/{print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)))
  done
  echo $((kib / 1024))
}
tables() { # sizes in MiB, dead tuples, share of updates that were HOT
  psql "$url" -qAt -F ' ' -c "
    SELECT relname,
           round(pg_table_size(relid) / 1048576.0, 1),
           round(pg_indexes_size(relid) / 1048576.0, 1),
           n_dead_tup,
           CASE WHEN n_tup_upd > 0 THEN round(100.0 * n_tup_hot_upd / n_tup_upd) ELSE 0 END
    FROM pg_stat_user_tables WHERE relname IN ('tasks', 'dispatch_outbox') ORDER BY relname"
}
queued() {
  timeout 10 rabbitmqctl list_queues name messages -q 2>/dev/null |
    awk -v p="$prefix." 'index($1, p) == 1 { n += $2 } END { print n + 0 }'
}

echo "== soak: $rate tasks/s for $minutes min, $mode, intervals of ${interval}s (autovacuum $(psql "$url" -qAtc 'SHOW autovacuum'))"
rounds=$(((minutes * 60 + interval - 1) / interval))
for round in $(seq 1 "$rounds"); do
  "$bin/taskstore" bench --endpoint "$endpoint" --scenario e2e --clients 64 --duration "${interval}s" \
    --rate "$rate" 2>/dev/null > "$out/soak-$round.json"
  read -r _ outbox_mib outbox_idx outbox_dead _ < <(tables | grep '^dispatch_outbox')
  read -r _ tasks_mib tasks_idx tasks_dead tasks_hot < <(tables | grep '^tasks')
  pg=$(rss_mib $(postgres_pids))
  printf 'interval %d/%d: %s tasks/s, create→worker-start p99 %s ms, create→result p99 %s ms | RSS MiB service %s, workers %s, postgres %s | tasks %s MiB + idx %s MiB, dead %s, HOT %s%% | outbox %s MiB + idx %s MiB, dead %s | queued %s\n' \
    "$round" "$rounds" \
    "$(figure "$out/soak-$round.json" create_to_result per_second)" \
    "$(figure "$out/soak-$round.json" create_to_worker_start p99_ms)" \
    "$(figure "$out/soak-$round.json" create_to_result p99_ms)" \
    "$(rss_mib "$service")" "$(rss_mib "${workers[@]}")" "$pg" \
    "$tasks_mib" "$tasks_idx" "$tasks_dead" "$tasks_hot" \
    "$outbox_mib" "$outbox_idx" "$outbox_dead" "$(queued)"
done
timeout 10 rabbitmqctl list_queues name -q 2>/dev/null | awk -v p="$prefix." 'index($1, p) == 1' |
  while read -r queue; do timeout 10 rabbitmqctl delete_queue "$queue" >/dev/null 2>&1 || true; done
echo "reports: $out"
