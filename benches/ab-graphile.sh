#!/usr/bin/env bash
# Alternating rounds of our e2e and of the graphile-worker baseline, so that
# the ratio the issue-28 targets are written in does not depend on where
# the machine's drift fell (run.sh takes each side once, minutes apart).
#
#   benches/ab-graphile.sh [rounds] [seconds] [clients]   (defaults: 6, 10 s, 8)
#   QUEUE_TYPE=classic benches/ab-graphile.sh ...         (ours on classic queues)
#   GRAPHILE_LOCAL_QUEUE=0 benches/ab-graphile.sh ...      (theirs without a local queue)
#   BENCH_BIN=../landed/target/release benches/ab-graphile.sh ...  (ours from another build)
#
# Ours: this tree's release build, `serve` on a database of its own
# (taskstore_bench_g, emptied and vacuumed before each round), two
# `taskworker --concurrency 32`. Theirs: benches/graphile/bench.mjs, two
# workers of 32 with a local queue of 33 (graphile-worker's advice for
# throughput; issue 40 asks for the baseline set up so), on a database made
# anew each round. Rounds alternate the
# order (ours first, then theirs first, …). Prints a line per run, then the
# medians, the ratio of the medians and the paired ratios' range, and CPU
# per task (every process on the machine) for both.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-6}; seconds=${2:-10}; clients=${3:-8}
queue_type=${QUEUE_TYPE:-quorum}
port=50162
endpoint="http://127.0.0.1:$port"
# BENCH_BIN=dir: our side runs that build's taskstore and taskworker (e.g. a
# worktree's release build, to set an earlier tree beside graphile-worker in
# the same sequence); the load generator is always this tree's.
bin=${BENCH_BIN:-./target/release}
loadgen=./target/release
out=$(mktemp -d)
source benches/ab-lib.sh
export PGSSLMODE=disable   # plain TCP for both, as run.sh measures
graphile_db=taskstore_bench_graphile
graphile_url="postgres://postgres@127.0.0.1:5432/$graphile_db?sslmode=disable"

# BENCH_NO_BUILD=1: use the release binaries already in target/release.
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release --bin taskstore --bin taskworker
[ -d benches/graphile/node_modules ] || npm ci --prefix benches/graphile --no-audit --no-fund --silent

ours() { # round
  e2e_run g "$bin" "$queue_type" "$loadgen" "ours-$1"
  echo "round $1 ours: $(json_figure "$out/ours-$1.json" "['operations']['create_to_result']['per_second']") tasks/s, cpu $(total_cpu "$out/cpu-ours-$1.txt") ms/task"
}

theirs() { # round
  dropdb -h 127.0.0.1 -U postgres --if-exists "$graphile_db"
  createdb -h 127.0.0.1 -U postgres "$graphile_db"
  node benches/graphile/bench.mjs migrate "$graphile_url"
  for _ in 1 2; do
    node benches/graphile/bench.mjs worker "$graphile_url" 32 &
    pids+=($!)
  done
  sleep 2
  python3 benches/cpu.py snapshot "$out/cpu-theirs-$1.json"
  node benches/graphile/bench.mjs load "$graphile_url" "$clients" "$seconds" > "$out/theirs-$1.json"
  python3 benches/cpu.py report "$out/cpu-theirs-$1.json" "$(json_figure "$out/theirs-$1.json" "['count']")" \
    > "$out/cpu-theirs-$1.txt"
  cleanup
  sleep 1
  echo "round $1 graphile-worker: $(json_figure "$out/theirs-$1.json" "['per_second']") jobs/s, cpu $(total_cpu "$out/cpu-theirs-$1.txt") ms/job"
}

prepare g "$bin"
for round in $(seq 1 "$rounds"); do
  if (( round % 2 )); then ours "$round"; theirs "$round"; else theirs "$round"; ours "$round"; fi
done

python3 - "$out" "$rounds" "$clients" "$queue_type" "$bin" <<'PY'
import json, re, statistics, sys
out, rounds, clients, queue_type, bin = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
runs = range(1, rounds + 1)
load = lambda name, r: json.load(open(f"{out}/{name}-{r}.json"))
cpu = lambda name, r: float(re.search(r"total ([0-9.]+) ms", open(f"{out}/cpu-{name}-{r}.txt").read()).group(1))
ours = [load("ours", r)["operations"]["create_to_result"]["per_second"] for r in runs]
theirs = [load("theirs", r)["per_second"] for r in runs]
ours_p50 = [load("ours", r)["operations"]["create_to_result"]["p50_ms"] for r in runs]
theirs_p50 = [load("theirs", r)["p50_ms"] for r in runs]
paired = [o / t for o, t in zip(ours, theirs)]
med = statistics.median
print(f"{clients} clients, ours ({bin}) on {queue_type} queues, {rounds} rounds")
print(f"ours median {med(ours):.0f}/s, graphile-worker median {med(theirs):.0f}/s: "
      f"ratio {med(ours) / med(theirs):.2f} (paired {min(paired):.2f}–{max(paired):.2f}, median {med(paired):.2f})")
print(f"create→done p50 median: ours {med(ours_p50):.1f} ms, graphile-worker {med(theirs_p50):.1f} ms")
print(f"cpu per task median: ours {med([cpu('ours', r) for r in runs]):.3f} ms, "
      f"graphile-worker {med([cpu('theirs', r) for r in runs]):.3f} ms")
PY
echo "reports: $out"
