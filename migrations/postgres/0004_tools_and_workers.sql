-- Every task names the tool it runs, dispatched or not, so listings can show
-- and filter by it: the tool it is dispatched to, else the `params.name` of a
-- `tools/call` request. Whether a task is dispatched is now told by
-- max_attempts, which only dispatch sets (it used to be told by tool).
--
-- Rolling upgrade: a replica from before this migration still treats "tool
-- IS NOT NULL" as dispatched. That is harmless: a claim needs a job of the
-- task's generation, and jobs exist only for dispatched tasks; at worst a
-- refused claim's message calls a task dispatched. Tasks created before this
-- migration keep no tool unless they were dispatched (no backfill: it would
-- rewrite the whole table).
ALTER TABLE tasks
    DROP CONSTRAINT tasks_dispatch_complete,
    ADD CONSTRAINT tasks_dispatch_has_tool CHECK (max_attempts IS NULL OR tool IS NOT NULL);

-- The workers that report in (TaskExecution.Heartbeat), for ListTools and
-- `taskstore status`. A row is refreshed every few seconds while its worker
-- lives, deleted when the worker stops, and swept when it falls silent.
CREATE TABLE workers (
    worker_id     text COLLATE "C" PRIMARY KEY,
    tools         text[] NOT NULL,
    slots         integer NOT NULL,
    busy          integer NOT NULL,
    first_seen_at timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL
);
