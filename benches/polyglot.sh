#!/usr/bin/env bash
# Worker libraries compared (issue 25): the no-op tool `conf_noop` dispatched
# through one Rust (`conformance-worker`: taskworker's runtime), one Python
# (`mcp_taskstore.worker`) and one TypeScript (`@mcp-taskstore/client/worker`)
# worker process in turn, on the same service, at the same concurrency, for the
# same time; rounds alternate the languages so that a change in the (shared)
# machine hits all three. Per language: tasks/s, create→worker-start and
# create→result latency, and CPU per task of the worker, the service,
# PostgreSQL and RabbitMQ.
#
#   benches/polyglot.sh [clients] [seconds] [rounds] [slots]   (defaults: 64, 10, 2, 64)
#   LANGUAGES="rust python" benches/polyglot.sh ...            (a subset)
#   TOOL=conf_sleep benches/polyglot.sh ...   (`conf_sleep {ms: 0}` as the no-op, for a
#                                             worker without conf_noop; no worker-start time)
#
# Its own database (taskstore_bench_polyglot) and port (50161), so that it
# does not meet another bench's service.
# Needs what benches/run.sh needs (PostgreSQL, RabbitMQ, python3), and node;
# builds the Python and TypeScript workers (worker/tests/conformance/build-workers).
set -euo pipefail
cd "$(dirname "$0")/.."

clients=${1:-64}
seconds=${2:-10}
rounds=${3:-2}
slots=${4:-64}
languages=${LANGUAGES:-rust python typescript}
tool=${TOOL:-conf_noop}
tool_flags=(--tool "$tool")
[ "$tool" = conf_sleep ] && tool_flags+=(--sleep-ms 0..0)
export BENCH_DATABASE=${BENCH_DATABASE:-taskstore_bench_polyglot}
. benches/lib.sh
port=50161
endpoint="http://127.0.0.1:$port"
[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release --bin conformance-worker
worker/tests/conformance/build-workers
empty_tables
prefix=bench-polyglot
amqp=amqp://guest:guest@127.0.0.1:5672/%2f

start_service --amqp-url "$amqp" --queue-prefix "$prefix"
service=${pids[-1]}

start_worker() { # language: starts one worker serving the conformance tools; sets $worker
  local flags=(--endpoint "$endpoint" --amqp-url "$amqp" --queue-prefix "$prefix"
    --concurrency "$slots" --worker-id "bench-$1" --log-level warn)
  case $1 in
    rust) "$bin/conformance-worker" "${flags[@]}" & ;;
    python) clients/python/.venv/bin/mcp-taskstore-worker mcp_taskstore.conformance:tools "${flags[@]}" & ;;
    typescript) node clients/typescript/dist/worker/cli.js "$PWD/clients/typescript/dist/worker/conformance.js" "${flags[@]}" & ;;
  esac
  worker=$!
  pids+=("$worker")
  if ! "$bin/taskstore" status --endpoint "$endpoint" --tool "$tool" --wait 30s --log-level warn >/dev/null; then
    echo "polyglot: the $1 worker does not serve $tool within 30 s (docs/worker-conformance.md)" >&2
    exit 1
  fi
  sleep 2 # its consumers, after its first heartbeat
}
stop_worker() {
  kill -TERM "$worker"
  wait "$worker" 2>/dev/null || true
}

start() { # report: create→worker-start, when the tool said when it started
  if [ "$tool" = conf_noop ]; then
    echo "; create→worker-start p50 $(figure "$1" create_to_worker_start p50_ms) / p99 $(figure "$1" create_to_worker_start p99_ms) ms"
  fi
}

declare -A rate
echo "== $tool through one worker per language: $clients clients, ${seconds}s each, $rounds rounds, $slots slots"
for round in $(seq 1 "$rounds"); do
  for language in $languages; do
    start_worker "$language"
    report="$out/$language-$round.json"
    python3 benches/cpu.py snapshot "$out/cpu.json"
    "$bin/taskstore" bench --endpoint "$endpoint" --scenario e2e "${tool_flags[@]}" --clients "$clients" \
      --duration "${seconds}s" > "$report"
    cpu=$(python3 benches/cpu.py report "$out/cpu.json" "$(figure "$report" create_to_result count)" \
      worker="$worker" taskstore="$service")
    stop_worker
    empty_tables
    rate[$language]=$(figure "$report" create_to_result per_second)
    echo "round $round $language: ${rate[$language]} tasks/s (create→result p50 $(figure "$report" create_to_result p50_ms) / p99 $(figure "$report" create_to_result p99_ms) ms$(start "$report")); $cpu"
  done
  for language in $languages; do
    [ "$language" = rust ] || [ -z "${rate[rust]:-}" ] || echo "round $round: $language / rust = $(ratio "${rate[$language]}" "${rate[rust]}")"
  done
done
# Where the service's share comes from: the RPCs per task of each language's
# worker (and of the load generator), counted in the service's access log
# over a short run of its own.
stop_service
"$bin/taskstore" serve --auth none --database-url "$url" --listen "127.0.0.1:$port" --cleanup-interval off \
  --db-max-connections 20 --amqp-url "$amqp" --queue-prefix "$prefix" \
  --log-format json --log-level 'warn,taskstore::access=debug,taskstore::grpc::observe=debug' 2>> "$out/access.log" &
pids+=($!)
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
for language in $languages; do
  start_worker "$language"
  before=$(wc -l < "$out/access.log")
  "$bin/taskstore" bench --endpoint "$endpoint" --scenario e2e "${tool_flags[@]}" --clients "$clients" \
    --duration 30s --count 2000 > "$out/$language-rpcs.json" 2>/dev/null
  sleep 1
  stop_worker
  tail -n "+$((before + 1))" "$out/access.log" | python3 -c '
import collections, json, sys
tasks = json.load(open(sys.argv[2]))["operations"]["create_to_result"]["count"]
calls = collections.Counter()
for line in sys.stdin:
    try:
        event = json.loads(line)
    except ValueError:
        continue
    if event.get("message") == "rpc":
        calls[event.get("rpc.method", "?")] += 1
total = sum(calls.values())
parts = ", ".join(f"{m} {n / tasks:.2f}" for m, n in calls.most_common())
print(f"rpcs per task, {sys.argv[1]} worker: {total / tasks:.2f} ({parts}; {tasks} tasks)")
' "$language" "$out/$language-rpcs.json"
  empty_tables
done
echo "reports: $out"
