-- The reaper reads only what may be due (issue 41, item 5: queued, delayed
-- and parked tasks hold no lease and cost it nothing), through two partial
-- indexes: the attempts renewed one by one, by their lease's expiry, and
-- the attempts claimed in a session, by session, which it reaches from the
-- expired sessions. A claim changes what they hold, so it is no longer a
-- HOT update (it was since migration 0007): the price of a reaper whose
-- work does not grow with the tasks that wait (BENCHMARKS.md, "Running
-- tasks at rest"). A claim records a session only while it is alive, and
-- an expired session's row stays an hour, so every attempt claimed in it
-- is found from it.
--
-- Expand only: the previous release never reads these indexes.
CREATE INDEX tasks_task_leases ON tasks (lease_expires_at)
    WHERE lease_session IS NULL AND lease_expires_at IS NOT NULL
        AND max_attempts IS NOT NULL AND status IN ('working', 'input_required');
CREATE INDEX tasks_session_leases ON tasks (lease_session)
    WHERE lease_session IS NOT NULL
        AND max_attempts IS NOT NULL AND status IN ('working', 'input_required');
