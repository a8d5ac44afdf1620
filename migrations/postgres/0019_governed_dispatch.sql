-- Governed dispatch (issue 40; docs/execution.md, "Dispatch: who goes
-- next"). A job is published when its tool's queue has room for it; until
-- then it waits here, and which waiting job goes next is decided when it is
-- published (`domain::next_jobs`): the highest priority first, tenants
-- taking turns, a tenant's own oldest first.
--
-- `priority` is the task's (kept on the task, so a retry's job gets it
-- again). `ready` marks a row that is due and waits for room: rows are
-- written not ready (a fresh job is handed to its replica's relay in
-- memory; a retry or a later start waits for its time) and become ready
-- when they fall due, so that the decision reads only what may go now,
-- through a small index, never the rows of later starts.
--
-- Expand only: the previous release neither reads nor writes the new
-- columns; its relay takes due rows first in, first out (by
-- `dispatch_outbox_due`), as before, while it runs beside this one.
ALTER TABLE tasks ADD COLUMN priority smallint NOT NULL DEFAULT 0;
ALTER TABLE dispatch_outbox ADD COLUMN priority smallint NOT NULL DEFAULT 0;
ALTER TABLE dispatch_outbox ADD COLUMN ready boolean NOT NULL DEFAULT false;

-- The waiting backlog per tool, in decision order within each tenant.
CREATE INDEX dispatch_outbox_ready ON dispatch_outbox (tool, tenant_id, priority DESC, id)
    WHERE ready;
-- What falls due next (only the rows not yet ready).
CREATE INDEX dispatch_outbox_pending ON dispatch_outbox (available_at, id)
    WHERE NOT ready;
