-- Task-change notifications also carry the task's new status, so that a
-- waiting GetTaskResult can skip progress updates without reading the task.
-- Payload: "<tenant> <task id> <status>" (none of the three contains a space).
-- A replica from before this migration reads "<task id> <status>" as the id,
-- matches no watcher, and falls back to its periodic re-check (5 s) until it
-- is upgraded.
CREATE OR REPLACE FUNCTION taskstore_notify_task_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('taskstore_task_changed', NEW.tenant_id || ' ' || NEW.task_id || ' ' || NEW.status);
    RETURN NULL;
END $$;
