# A PostgreSQL cluster of the benchmark's own, configured as a production
# one (autovacuum on), for soak.sh's `production` mode. Source it, then
# own_postgres_start: it sets BENCH_PG_PORT for lib.sh and stops the
# cluster (by the PID it wrote) when the script exits. Never touches the
# machine's shared cluster. Run as root (initdb runs as postgres).

own_postgres_start() {
  local bin version
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  own_postgres_dir=$(mktemp -d "${TMPDIR:-/tmp}/taskstore-soak-pg.XXXXXX")
  chown postgres:postgres "$own_postgres_dir"
  BENCH_PG_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  export BENCH_PG_PORT
  runuser -u postgres -- "$bin/initdb" -D "$own_postgres_dir/data" -U postgres --auth trust \
    --data-checksums -E UTF8 >/dev/null
  cat >> "$own_postgres_dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $BENCH_PG_PORT
unix_socket_directories = '$own_postgres_dir'
max_connections = 200
shared_buffers = 1GB
effective_cache_size = 3GB
work_mem = 16MB
maintenance_work_mem = 256MB
wal_buffers = 16MB
max_wal_size = 4GB
checkpoint_completion_target = 0.9
random_page_cost = 1.1
fsync = on
synchronous_commit = on
autovacuum = on
log_autovacuum_min_duration = 0
CONF
  runuser -u postgres -- "$bin/pg_ctl" -D "$own_postgres_dir/data" -l "$own_postgres_dir/postgres.log" -w start >/dev/null
  own_postgres_pid=$(head -n 1 "$own_postgres_dir/data/postmaster.pid")
  version=$("$bin/postgres" --version)
  echo "== own PostgreSQL ($version) on 127.0.0.1:$BENCH_PG_PORT, pid $own_postgres_pid, autovacuum on, data in $own_postgres_dir"
  trap own_postgres_stop EXIT
}

own_postgres_stop() {
  # lib.sh's cleanup (the service and workers) first, then the cluster.
  if declare -F cleanup >/dev/null; then cleanup; fi
  if [[ -n "${own_postgres_pid:-}" ]] && kill -0 "$own_postgres_pid" 2>/dev/null; then
    kill -INT "$own_postgres_pid" 2>/dev/null || true   # fast shutdown
    for _ in $(seq 1 100); do kill -0 "$own_postgres_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$own_postgres_pid" 2>/dev/null || true
  fi
  # The server's log (every autovacuum run is in it) outlives the cluster.
  if [[ -n "${out:-}" && -f "$own_postgres_dir/postgres.log" ]]; then
    cp "$own_postgres_dir/postgres.log" "$out/postgres.log" && echo "PostgreSQL's log: $out/postgres.log"
  fi
  if [[ "${KEEP_SOAK_PG:-}" == 1 ]]; then echo "kept $own_postgres_dir"; else rm -rf "$own_postgres_dir"; fi
}
