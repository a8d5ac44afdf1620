#!/usr/bin/env bash
# Alternating A/B of the e2e benchmark between two builds: the cost of a
# change on the dispatch path, measured in one sequence on one machine.
#
#   benches/ab-e2e.sh A_BIN_DIR B_BIN_DIR [rounds] [seconds] [clients] [rate]
#   (defaults: 10 rounds of 10 s, 64 clients, full speed)
#
# With a rate (tasks/s in all), the clients pace themselves to it, and the
# figure to compare is latency (create→worker-start p99) rather than rate.
# Every run also reports the machine's CPU time per task (all processes).
#
# Each side has a database of its own (taskstore_bench_a, _b, made anew: each
# build migrates its own schema) emptied and vacuumed before every run, the same
# `serve` flags and two `taskworker --concurrency 32` on quorum queues (or
# AB_QUEUE_*) of its own prefix, and `taskstore bench --scenario e2e` from the
# B build (the same load generator for both). Rounds alternate the order (AB,
# BA, …) so that drift on the machine falls on both alike. Prints one line per
# run and the B/A ratios by mean and by median, and the paired ratios' range.
#
# A_BIN_DIR, B_BIN_DIR hold taskstore and taskworker (release builds), e.g.
# a git worktree's target/release and ./target/release. AB_SQL_A / AB_SQL_B:
# SQL run on that side's database after its migrations, to measure a
# ceiling by hand (a step taken out, e.g. an index dropped) with one build.
# AB_QUEUE_A / AB_QUEUE_B: that side's queue type (default quorum), to
# measure what the queue type costs with one build.
set -euo pipefail
cd "$(dirname "$0")/.."
a=${1:?A_BIN_DIR}; b=${2:?B_BIN_DIR}
rounds=${3:-10}; seconds=${4:-10}; clients=${5:-64}; rate=${6:-}
port=50161
endpoint="http://127.0.0.1:$port"
out=$(mktemp -d)
source benches/ab-lib.sh

run() { # side bin round
  local side=$1 bin=$2 round=$3
  local queue_var="AB_QUEUE_${side^^}"
  e2e_run "$side" "$bin" "${!queue_var:-quorum}" "$b" "$side-$round" ${rate:+--rate "$rate"}
  python3 -c "import json,re,sys; o=json.load(open(sys.argv[1]))['operations']
r, s = o['create_to_result'], o.get('create_to_worker_start', {'p99_ms': 0})
cpu = re.search(r'total ([0-9.]+) ms', open(sys.argv[4]).read()).group(1)
print(f\"round {sys.argv[2]} {sys.argv[3]}: {r['per_second']:.0f} tasks/s, create→result p50 {r['p50_ms']:.1f} ms, create→worker-start p99 {s['p99_ms']:.1f} ms, cpu {cpu} ms/task\")" \
    "$out/$side-$round.json" "$round" "$side" "$out/cpu-$side-$round.txt"
}

alternate "$rounds"
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
import re
ops = lambda side, r: json.load(open(f"{out}/{side}-{r}.json"))["operations"]
rate = lambda side, r: ops(side, r)["create_to_result"]["per_second"]
p50 = lambda side, r: ops(side, r)["create_to_result"]["p50_ms"]
p99_start = lambda side, r: ops(side, r).get("create_to_worker_start", {"p99_ms": 0})["p99_ms"]
cpu = lambda side, r: float(re.search(r"total ([0-9.]+) ms", open(f"{out}/cpu-{side}-{r}.txt").read()).group(1))
runs = range(1, rounds + 1)
a = [rate("a", r) for r in runs]
b = [rate("b", r) for r in runs]
paired = [y / x for x, y in zip(a, b)]
med = statistics.median
print(f"A mean {statistics.mean(a):.0f}/s median {med(a):.0f}/s; B mean {statistics.mean(b):.0f}/s median {med(b):.0f}/s")
print(f"B/A by mean {statistics.mean(b) / statistics.mean(a):.3f}, by median {med(b) / med(a):.3f}; paired {min(paired):.2f}–{max(paired):.2f}")
for name, f in (("create→result p50 ms", p50), ("create→worker-start p99 ms", p99_start), ("cpu ms/task", cpu)):
    xa, xb = med([f("a", r) for r in runs]), med([f("b", r) for r in runs])
    print(f"median {name}: A {xa:.2f}, B {xb:.2f}, B/A {xb / xa if xa else 0:.2f}")
# Where the CPU went: each process group's median ms per task.
group = lambda side, r, g: float(re.search(rf"\b{g} ([0-9.]+) ms", open(f"{out}/cpu-{side}-{r}.txt").read()).group(1))
parts = []
for g in ("service", "workers", "postgres", "rabbitmq", "other"):
    xa, xb = med([group("a", r, g) for r in runs]), med([group("b", r, g) for r in runs])
    parts.append(f"{g} {xa:.2f} → {xb:.2f}")
print("median cpu ms/task by process, A → B: " + ", ".join(parts))
PY
echo "reports: $out"
