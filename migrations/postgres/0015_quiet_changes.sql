-- Task-change notifications only where someone listens. Every claim and
-- every status change or result sent a notification (migrations 0002,
-- 0012): a plpgsql call and a JSON payload per row, the notify-queue lock
-- held across each commit, and a parse in every replica, even when no
-- replica had a watcher, stream or waiting call for the tenant, and even
-- when the only one listening was the replica that made the change (which
-- can tell its own subscribers in process).
--
-- Now each replica registers the tenants its subscribers follow
-- (`change_listeners`, renewed every 10 s; a registration not renewed for
-- 30 s counts as gone). The claim and status-change statements of this
-- version decide per row whether any other replica listens to the task's
-- tenant; when none does, they bump `quiet_changes`, the trigger stays
-- silent, and the writing replica tells its own subscribers in process.
-- Every other statement (and every statement of an older version) leaves
-- `quiet_changes` alone, so it notifies as before.
--
-- Rolling upgrade: replicas of the previous version listen without
-- registering. A replica of this version notices them (a LISTEN session
-- without this version's application name in `pg_stat_activity`) and
-- stays loud while any is connected. Expand only: the previous version
-- ignores the table and the column.
CREATE TABLE change_listeners (
    tenant_id   text NOT NULL,
    replica_id  text NOT NULL,
    renewed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, replica_id)
);

ALTER TABLE tasks ADD COLUMN quiet_changes bigint NOT NULL DEFAULT 0;

DROP TRIGGER tasks_notify_changed ON tasks;
CREATE TRIGGER tasks_notify_changed AFTER UPDATE ON tasks
    FOR EACH ROW
    WHEN ((OLD.status IS DISTINCT FROM NEW.status
           OR OLD.status_message IS DISTINCT FROM NEW.status_message
           OR OLD.last_updated_at IS DISTINCT FROM NEW.last_updated_at)
          AND OLD.quiet_changes = NEW.quiet_changes)
    EXECUTE FUNCTION taskstore_notify_task_changed();
