-- Idempotent creates (issue 40): the key a create carried, while it still
-- names its task. At most one task of a tenant holds a key; a create with
-- that key returns the task (same request) or is refused (another one). The
-- key is cleared when its retention passes (by the next create with it) and
-- goes with its task when the task is deleted or replaced.
--
-- Expand only: the previous release neither writes nor reads the column
-- during a rolling upgrade. It does not clear a key when it reuses an
-- expired task's id either; such a stale key then names a task with another
-- request, so a create with it is refused rather than handed that task.
ALTER TABLE tasks ADD COLUMN idempotency_key text COLLATE "C";

-- Only keyed tasks are indexed: creates without a key (almost all) pay
-- nothing for it.
CREATE UNIQUE INDEX tasks_idempotency_key ON tasks (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
