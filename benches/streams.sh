#!/usr/bin/env bash
# What open MCP streams cost the replica holding them, and what happens to
# them when it stops (issue 24): `taskstore bench --scenario mcp-streams`
# against two replicas of `taskstore serve --auth none` on PostgreSQL.
#
# Replica A serves the streams: one GET /mcp stream per MCP session (each
# after its own `initialize`) and 2026-07-28 `subscriptions/listen` streams.
# The changes (UpdateTaskStatus of tasks in some of those sessions, each
# task created with a progress token) go through replica B's gRPC port, so
# A does for them only what a replica holding streams does for changes made
# elsewhere. In one run: the changes at a fixed rate with no stream open
# (the baseline), A's RSS before and after opening the streams, A's CPU with
# them idle, the same changes with them open (CPU per stream and per
# notification, change→receipt latency, every change on exactly the streams
# that follow its task); then A gets SIGTERM with the changes going on, and
# every stream must end and come back on B (Last-Event-ID, or listening
# again) with what it missed.
#
#   benches/streams.sh [streams] [rate] [seconds] [listeners]
#                      (defaults: 500 streams, 200 changes/s, 15 s, 50)
#   BENCH_FLAGS="--message-padding 4000" benches/streams.sh ...
#                      (more `taskstore bench` flags, e.g. status messages
#                      too large for PostgreSQL's notifications)
#
# Needs PostgreSQL (127.0.0.1:5432, user postgres) and python3; no broker
# (nothing is dispatched). Uses (and empties) the database
# taskstore_bench_streams (BENCH_DATABASE to change it).
set -euo pipefail
cd "$(dirname "$0")/.."

streams=${1:-500}
rate=${2:-200}
seconds=${3:-15}
listeners=${4:-50}
export BENCH_DATABASE=${BENCH_DATABASE:-taskstore_bench_streams}
. benches/lib.sh
# Ports below the ephemeral range (32768-60999 here), so that no outgoing
# connection holds one of them when a replica binds it.
port=20161
empty_tables
# This machine runs with autovacuum off: start from a vacuumed table (the
# run leaves about rate × 3 × seconds dead row versions behind).
psql "$url" -qc "VACUUM ANALYZE tasks"
echo "autovacuum: $(psql "$url" -qAtc 'SHOW autovacuum')"

mcp_a=20171
mcp_b=20172
start_service --amqp-url none --embedded-workers 0 --mcp-listen "127.0.0.1:$mcp_a"
replica_a=${pids[-1]}
port=$((port + 1))
start_service --amqp-url none --embedded-workers 0 --mcp-listen "127.0.0.1:$mcp_b"
replica_b=${pids[-1]}
sleep 1

# Connections the kernel dropped because a listener's accept queue was full
# (machine-wide, TcpExtListenOverflows), before and after the run.
overflows() { awk '/^TcpExt:/ { if (!n) { for (i = 1; i <= NF; i++) if ($i == "ListenOverflows") c = i; n = 1 } else print $c }' /proc/net/netstat; }
overflows_before=$(overflows)

echo "== $streams session streams + $listeners subscriptions on replica A; $rate changes/s through replica B; ${seconds}s per phase"
"$bin/taskstore" bench --endpoint "http://127.0.0.1:$port" --scenario mcp-streams \
  --mcp-url "http://127.0.0.1:$mcp_a/mcp" --service-pid "$replica_a" \
  --failover-mcp-url "http://127.0.0.1:$mcp_b/mcp" --failover-pid "$replica_b" \
  --streams "$streams" --listeners "$listeners" --rate "$rate" --duration "${seconds}s" \
  --clients 8 ${BENCH_FLAGS:-} > "$out/streams.json"

python3 - "$out/streams.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
s, ops = r["streams"], r["operations"]
mib = lambda kib: f"{kib / 1024:.1f} MiB"
lat = lambda name: (f"p50 {ops[name]['p50_ms']:.2f} ms, p99 {ops[name]['p99_ms']:.2f} ms ({ops[name]['count']})"
                    if name in ops else "none")
opened = s["streams"] + s["listeners"]
print(f"memory of A: {mib(s['rss_kib_before_streams'])} before the streams, {mib(s['rss_kib_streams_open'])} "
      f"with {opened} open, {mib(s['rss_kib_after_measured'])} after the measured phase: "
      f"{s['rss_kib_per_stream']:.1f} KiB per stream")
base, idle, busy = s["cpu_ms_per_s_baseline"], s["cpu_ms_per_s_idle_streams"], s["cpu_ms_per_s_streams"]
print(f"cpu of A: {base:.1f} ms/s with no stream open (baseline, {s['rate_baseline']:.0f} changes/s), "
      f"{idle:.1f} ms/s with the streams open and no change, {busy:.1f} ms/s with the streams open "
      f"({s['rate_measured']:.0f} changes/s): ratio {busy / max(base, 1e-9):.2f}")
print(f"  per open stream {s['cpu_us_per_s_per_stream']:.1f} µs of CPU per second; "
      f"per notification delivered {s['cpu_us_per_notification']:.1f} µs ({s['notifications_per_s']:.0f}/s); "
      f"per change and open stream {s['cpu_ns_per_change_and_stream']:.0f} ns; "
      f"load generator {s['load_generator_cpu_ms_per_s']:.0f} ms/s")
print(f"change→receipt: status {lat('stream_delivery')}; progress {lat('progress_delivery')}; "
      f"subscriptions {lat('listen_delivery')}; update RPC {lat('update')}")
for kind in ("session_streams", "subscriptions"):
    c = s["checks"][kind]
    print(f"{kind}: {c['streams']} streams, failed {c['failed']}, foreign {c['foreign']}, missing {c['missing']}, "
          f"missing progress {c['missing_progress']}, duplicates {c['duplicates']}, out of order {c['out_of_order']}, "
          f"latest not shown {c['latest_not_shown']}, during the stop: shown {c['handover_shown']}, "
          f"folded into a later state {c['handover_folded']}" + (f"; e.g. {c['examples']}" if c["examples"] else ""))
h = s["handover"]
if h:
    fmt = lambda v: "never" if v is None else f"{v:.0f} ms"
    print(f"stop of A: {h['ended']}/{opened} streams ended ({h['ended_with_retry']} told a retry delay), last after "
          f"{fmt(h['all_ended_ms'])}; {h['back']}/{opened} back on B ({h['back_later_than_1s']} more than 1 s after the stop), last after {fmt(h['all_back_ms'])} "
          f"(ended {lat('handover_ended')}; back {lat('handover_back')}); A exited after {fmt(h['exited_ms'])}; "
          f"B's RSS {mib(h['rss_kib_failover_before'])} → {mib(h['rss_kib_failover_after'])}")
print("complete: " + ("yes" if s["complete"] else "NO"))
EOF
echo "listen queue overflows (machine-wide) during the run: $(($(overflows) - overflows_before))"
echo "report: $out/streams.json"
