-- Sustained load: every step of every task rewrites its row in `tasks`, and
-- every dispatch inserts and deletes a row of `dispatch_outbox`. Two things
-- keep these tables from bloating (and the service from slowing down as they
-- do):
--
-- 1. HOT updates. An update that changes no indexed column, and finds room on
--    its page, adds no index entries and is pruned on the page without
--    VACUUM. The reaper's index on `lease_expires_at` made every claim and
--    lease renewal a non-HOT update; it is replaced by an index on the open
--    dispatched tasks, whose columns and predicate do not change while a task
--    runs (the reaper scans it and checks each lease). `fillfactor` leaves
--    room on each page for the new row versions (it applies to pages written
--    from now on; existing pages keep theirs until the table is rewritten).
-- 2. Their own autovacuum settings. The defaults vacuum a table once a fifth
--    of it is dead, which for a queue table is far too late: the outbox is
--    vacuumed every thousand dead rows whatever its size, `tasks` at 2%.
--
-- Rolling upgrades: replicas of the previous version run the same reaper
-- query, which still works (without its old index). Building the new index
-- locks writes to `tasks` for as long as the build takes (seconds per
-- million open dispatched tasks).

ALTER TABLE tasks SET (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.05
);

ALTER TABLE dispatch_outbox SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0
);

DROP INDEX IF EXISTS tasks_lease_expiry;
CREATE INDEX tasks_open_dispatched ON tasks (created_at)
    WHERE max_attempts IS NOT NULL AND status IN ('working', 'input_required');
