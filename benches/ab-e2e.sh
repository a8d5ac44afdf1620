#!/usr/bin/env bash
# Alternating A/B of the e2e benchmark between two builds: the cost of a
# change on the dispatch path, measured in one sequence on one machine.
#
#   benches/ab-e2e.sh A_BIN_DIR B_BIN_DIR [rounds] [seconds] [clients]
#   (defaults: 10 rounds of 10 s, 64 clients)
#
# Each side has a database of its own (taskstore_bench_a, _b: each build
# migrates its own schema) emptied and vacuumed before every run, the same
# `serve` flags and two `taskworker --concurrency 32` on quorum queues of
# its own prefix, and `taskstore bench --scenario e2e` from the B build (the
# same load generator for both). Rounds alternate the order (AB, BA, …) so
# that drift on the machine falls on both alike. Prints one line per run and
# the B/A ratios by mean and by median, and the paired ratios' range.
#
# A_BIN_DIR, B_BIN_DIR hold taskstore and taskworker (release builds), e.g.
# a git worktree's target/release and ./target/release.
set -euo pipefail
cd "$(dirname "$0")/.."
a=${1:?A_BIN_DIR}; b=${2:?B_BIN_DIR}
rounds=${3:-10}; seconds=${4:-10}; clients=${5:-64}
port=50161
endpoint="http://127.0.0.1:$port"
out=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap cleanup EXIT

prepare() { # side bin
  local db="taskstore_bench_$1"
  psql -h 127.0.0.1 -U postgres -d postgres -qAtc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1 \
    || createdb -h 127.0.0.1 -U postgres "$db"
  "$2/taskstore" migrate --database-url "postgres://postgres@127.0.0.1:5432/$db" >/dev/null
}

run() { # side bin round
  local side=$1 bin=$2 round=$3
  local url="postgres://postgres@127.0.0.1:5432/taskstore_bench_$side"
  psql "$url" -qc "TRUNCATE tasks, dispatch_outbox CASCADE" -c "VACUUM ANALYZE tasks"
  "$bin/taskstore" serve --auth none --database-url "$url" --listen "127.0.0.1:$port" \
    --amqp-url amqp://guest:guest@127.0.0.1:5672/%2f --queue-prefix "ab-$side" \
    --cleanup-interval off --db-max-connections 20 --log-level warn &
  pids+=($!)
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  for n in 1 2; do
    "$bin/taskworker" --endpoint "$endpoint" --queue-prefix "ab-$side" --queue-type quorum \
      --tools noop --concurrency 32 --worker-id "ab-$side-$n" --log-level warn &
    pids+=($!)
  done
  sleep 2
  "$b/taskstore" bench --endpoint "$endpoint" --scenario e2e --clients "$clients" --duration "${seconds}s" \
    > "$out/$side-$round.json"
  cleanup
  sleep 1
  python3 -c "import json,sys; o=json.load(open(sys.argv[1]))['operations']['create_to_result']
print(f\"round {sys.argv[2]} {sys.argv[3]}: {o['per_second']:.0f} tasks/s, create→result p50 {o['p50_ms']:.1f} ms\")" \
    "$out/$side-$round.json" "$round" "$side"
}

prepare a "$a"; prepare b "$b"
for round in $(seq 1 "$rounds"); do
  if (( round % 2 )); then run a "$a" "$round"; run b "$b" "$round"; else run b "$b" "$round"; run a "$a" "$round"; fi
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rate = lambda side, r: json.load(open(f"{out}/{side}-{r}.json"))["operations"]["create_to_result"]["per_second"]
a = [rate("a", r) for r in range(1, rounds + 1)]
b = [rate("b", r) for r in range(1, rounds + 1)]
paired = [y / x for x, y in zip(a, b)]
print(f"A mean {statistics.mean(a):.0f}/s median {statistics.median(a):.0f}/s; B mean {statistics.mean(b):.0f}/s median {statistics.median(b):.0f}/s")
print(f"B/A by mean {statistics.mean(b) / statistics.mean(a):.3f}, by median {statistics.median(b) / statistics.median(a):.3f}; paired {min(paired):.2f}–{max(paired):.2f}")
PY
echo "reports: $out"
