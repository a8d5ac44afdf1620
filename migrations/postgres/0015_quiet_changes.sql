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

-- A notified change that ends a task with a result carries the result too
-- ("r", the JSON text), when it fits the payload: a call waiting for it on
-- another replica answers without reading the row. Replicas of the
-- previous version ignore the key.
CREATE OR REPLACE FUNCTION taskstore_notify_task_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    head text := NEW.tenant_id || ' ' || NEW.task_id || ' ' || NEW.status;
    body text;
    with_result text;
BEGIN
    body := json_build_object(
        'm', NEW.status_message,
        'c', (extract(epoch FROM NEW.created_at) * 1000000)::bigint,
        'u', (extract(epoch FROM NEW.last_updated_at) * 1000000)::bigint,
        't', NEW.ttl_ms,
        'p', NEW.poll_interval_ms,
        's', NEW.session_id,
        'o', NEW.tool,
        'k', NEW.progress_token)::text;
    IF octet_length(head) + octet_length(body) > 7900 THEN
        body := '{"x":true}';
    ELSIF NEW.result_json IS NOT NULL AND NEW.status IN ('completed', 'failed', 'cancelled') THEN
        with_result := left(body, -1) || ',"r":' || to_json(NEW.result_json)::text || '}';
        IF octet_length(head) + octet_length(with_result) <= 7900 THEN
            body := with_result;
        END IF;
    END IF;
    PERFORM pg_notify('taskstore_task_changed', head || E'\n' || body);
    RETURN NULL;
END $$;
