-- Limits per key (issue 40; docs/execution.md, "Concurrency limits per
-- key" and "Rates per key"). A tool declares "at most N of my tasks run at
-- once per key" and "at most N start per window per key"; each task's keys
-- are computed when it is created and kept with it (`limit_key`,
-- `limit_max`; `rate_key`, `rate_starts`, `rate_per_ms`), so that a retry's
-- job is limited again.
--
-- A limited job is published only by the dispatch decision, which counts
-- the slots its key holds under the tool's lock. `dispatch_slots` records
-- which task took a slot for which job generation; a row holds only while
-- that generation's attempt can still run (the task is open, not
-- dispatched again or parked, and under no expired lease: `holds_slot!` in
-- store/postgres/conditions.rs), so nothing else has to give a slot back.
-- The decision deletes the rows that no longer hold.
--
-- Expand only: the previous release neither reads nor writes these; while
-- it runs beside this one, the tasks it creates carry no limit and its
-- relay publishes limited jobs that fall due without counting them
-- (docs/operations.md, upgrades).
ALTER TABLE tasks ADD COLUMN limit_key text;
ALTER TABLE tasks ADD COLUMN limit_max integer;
ALTER TABLE tasks ADD COLUMN rate_key text;
ALTER TABLE tasks ADD COLUMN rate_starts integer;
ALTER TABLE tasks ADD COLUMN rate_per_ms bigint;

CREATE TABLE dispatch_slots (
    tenant_id text NOT NULL,
    task_id text NOT NULL,
    tool text NOT NULL,
    limit_key text NOT NULL,
    generation bigint NOT NULL,
    taken_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, task_id)
);
CREATE INDEX dispatch_slots_by_key ON dispatch_slots (tool, limit_key);

-- The jobs of rated keys the decision sent, each until its window is over
-- (`expires_at`): a key's count is its rows not yet expired, read and
-- written under the tool's lock, so every replica shares it. The decision
-- deletes the expired rows of the tool it decides.
CREATE TABLE dispatch_starts (
    tool text NOT NULL,
    rate_key text NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX dispatch_starts_by_key ON dispatch_starts (tool, rate_key, expires_at);

-- Keys a tool was told to leave alone until a time (a release with
-- RELEASE_REASON_BACK_OFF: a 429's Retry-After). The key is the task's
-- rate key, else its concurrency key, else '' (the whole tool); the
-- decision passes over the jobs of a paused key, and deletes the pauses
-- that are over.
CREATE TABLE dispatch_pauses (
    tool text NOT NULL,
    pause_key text NOT NULL,
    until timestamptz NOT NULL,
    PRIMARY KEY (tool, pause_key)
);
