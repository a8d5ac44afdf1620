#!/usr/bin/env bash
# The scale target: `create` and `get` throughput with 10 million tasks in
# the table, as a ratio to the same figures with 10 thousand, each next to
# pgbench doing the same SQL work on the same table.
#
#   benches/scale.sh [clients] [seconds] [large rows]   (defaults: 64, 10, 10000000)
#
# Same needs as run.sh; uses (and empties) the database taskstore_bench.
# Seeding 10 million rows takes a few minutes and about 4 GB of disk.
set -euo pipefail
cd "$(dirname "$0")/.."

clients=${1:-64}
seconds=${2:-10}
large=${3:-10000000}
small=10000
. benches/lib.sh

measure() { # label rows: create and get with <rows> tasks in the table
  local label=$1 rows=$2
  empty_tables
  seed "$rows"
  start_service --amqp-url none --embedded-workers 0
  "$bin/taskstore" bench --endpoint "$endpoint" --scenario create --clients "$clients" --duration "${seconds}s" > "$out/create-$label.json"
  local create_base; create_base=$(pgbench_tps create)
  "$bin/taskstore" bench --endpoint "$endpoint" --scenario get --clients "$clients" --duration "${seconds}s" --seeded "$rows" > "$out/get-$label.json"
  local get_base; get_base=$(pgbench_tps get -D rows="$rows")
  stop_service
  echo "$label ($rows rows): create $(figure "$out/create-$label.json" create per_second)/s (pgbench $create_base), get $(figure "$out/get-$label.json" get per_second)/s (pgbench $get_base)"
}

measure small "$small"
measure large "$large"
for op in create get; do
  echo "$op: ${large} rows / ${small} rows = $(ratio "$(figure "$out/$op-large.json" "$op" per_second)" "$(figure "$out/$op-small.json" "$op" per_second)") (target ≥ 0.85)"
done
echo "reports: $out"
