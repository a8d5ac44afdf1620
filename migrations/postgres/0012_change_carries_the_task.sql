-- Task-change notifications carry the task as it is after the change, so
-- that every replica's watchers and streams (WatchTask, WatchTasks, MCP
-- notifications) show it without reading it back: no database round trip
-- per change and listener.
--
-- Payload: the first line as before ("<tenant> <task id> <status>"), then a
-- newline and a JSON object: m status message, c created_at and u
-- last_updated_at (microseconds since the epoch), t ttl_ms, p
-- poll_interval_ms, s session id, o tool, k progress token (JSON text).
-- A task whose notification would exceed PostgreSQL's 8000-byte limit
-- sends the first line only (with "x": the listener reads the task then).
--
-- `progress_token`: the `_meta.progressToken` of the MCP request that
-- created the task (JSON text), for progress notifications from any
-- replica; set at create by this version on, NULL before.
--
-- Rolling upgrade: a replica from before this migration reads
-- "<status>\n{...}" as an unknown status and reads the task instead, as it
-- did for statusless payloads; it creates tasks without a progress token.
ALTER TABLE tasks ADD COLUMN progress_token text;

CREATE OR REPLACE FUNCTION taskstore_notify_task_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    head text := NEW.tenant_id || ' ' || NEW.task_id || ' ' || NEW.status;
    body text;
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
    END IF;
    PERFORM pg_notify('taskstore_task_changed', head || E'\n' || body);
    RETURN NULL;
END $$;
