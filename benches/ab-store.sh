#!/usr/bin/env bash
# Alternating A/B of a store-only scenario (create or get) between two
# builds: what a change costs the calls that touch one row, measured in one
# sequence on one machine (ab-e2e.sh does the same for the dispatch path).
#
#   benches/ab-store.sh A_BIN_DIR B_BIN_DIR [scenario] [rounds] [seconds] [clients]
#   (defaults: create, 6 rounds of 8 s, 64 clients)
#
# Each side has a database of its own (taskstore_bench_a, _b; ab-lib.sh), emptied and
# vacuumed before every run, and `serve` with no broker; `get` reads 10,000
# tasks the load generator creates first. The load generator is the B
# build's. Rounds alternate the order (AB, BA, …). Prints one line per run,
# then B/A by mean and by median, and the paired ratios' range.
set -euo pipefail
cd "$(dirname "$0")/.."
a=${1:?A_BIN_DIR}; b=${2:?B_BIN_DIR}
scenario=${3:-create}; rounds=${4:-6}; seconds=${5:-8}; clients=${6:-64}
case $scenario in create|get) ;; *) echo "ab-store.sh: scenario is create or get" >&2; exit 2 ;; esac
port=50162
endpoint="http://127.0.0.1:$port"
out=$(mktemp -d)
source benches/ab-lib.sh

run() { # side bin round
  local side=$1 bin=$2 round=$3
  serve_side "$side" "$bin" --amqp-url none --embedded-workers 0 --log-level error
  "$b/taskstore" bench --endpoint "$endpoint" --scenario "$scenario" --clients "$clients" \
    --duration "${seconds}s" --tasks 10000 > "$out/$side-$round.json" 2>/dev/null
  cleanup
  python3 -c "import json,sys; o=json.load(open(sys.argv[1]))['operations'][sys.argv[4]]
print(f\"round {sys.argv[2]} {sys.argv[3]}: {o['per_second']:.0f}/s, p50 {o['p50_ms']:.2f} ms, p99 {o['p99_ms']:.2f} ms\")" \
    "$out/$side-$round.json" "$round" "$side" "$scenario"
}

alternate "$rounds"
python3 - "$out" "$rounds" "$scenario" <<'PY'
import json, statistics, sys
out, rounds, scenario = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rate = lambda side, r: json.load(open(f"{out}/{side}-{r}.json"))["operations"][scenario]["per_second"]
a = [rate("a", r) for r in range(1, rounds + 1)]
b = [rate("b", r) for r in range(1, rounds + 1)]
paired = [y / x for x, y in zip(a, b)]
med = statistics.median
print(f"{scenario}: A mean {statistics.mean(a):.0f}/s median {med(a):.0f}/s; B mean {statistics.mean(b):.0f}/s median {med(b):.0f}/s")
print(f"B/A by mean {statistics.mean(b) / statistics.mean(a):.3f}, by median {med(b) / med(a):.3f}; paired {min(paired):.2f}–{max(paired):.2f}")
PY
echo "reports: $out"
