# What ab-e2e.sh and ab-store.sh share: the processes a run started (killed
# on exit), and each side's database. Source it after `cd` to the checkout.

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap cleanup EXIT

# A side's database (taskstore_bench_<side>), made anew so that no index or
# setting from an earlier run's AB_SQL is left, migrated by that side's
# build; then AB_SQL_A / AB_SQL_B, if set, is run on it.
prepare() { # side bin
  local db="taskstore_bench_$1"
  dropdb -h 127.0.0.1 -U postgres --if-exists "$db"
  createdb -h 127.0.0.1 -U postgres "$db"
  "$2/taskstore" migrate --database-url "postgres://postgres@127.0.0.1:5432/$db" >/dev/null
  local sql_var="AB_SQL_${1^^}"
  if [[ -n "${!sql_var:-}" ]]; then psql -h 127.0.0.1 -U postgres -d "$db" -qc "${!sql_var}"; fi
}

# Prepares both sides, then calls `run side bin round` for each round, in
# the order AB, BA, AB, … so that drift on the machine falls on both alike.
alternate() { # rounds (uses $a and $b, the bin dirs)
  prepare a "$a"; prepare b "$b"
  for round in $(seq 1 "$1"); do
    if (( round % 2 )); then run a "$a" "$round"; run b "$b" "$round"; else run b "$b" "$round"; run a "$a" "$round"; fi
  done
}
