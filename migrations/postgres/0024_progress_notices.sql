-- Progress that is cheap to send often (issue 41, item 3; docs/execution.md,
-- "Progress"). A running task's progress reaches its followers on every
-- replica at once, but its row is written at most every few seconds: in
-- between, the service sends the change's notification itself, from a
-- SELECT that checks the attempt's lease, without writing the row. So the
-- notification's payload is built in two places, the trigger (a written
-- change) and that SELECT (a progress notice): `taskstore_change_payload`
-- builds it for both (0012's shape, 0015's result key added by the
-- trigger). `payload_bytes` is the budget a payload must fit (NOTIFY takes
-- 8000 bytes): over it, the payload says only that the task changed.
--
-- Expand only: the previous release's trigger builds the same payload.
CREATE FUNCTION taskstore_change_payload(
    tenant_id text, task_id text, status text, message text, created_at timestamptz,
    last_updated_at timestamptz, ttl_ms bigint, poll_interval_ms bigint, session_id text,
    tool text, progress_token text, result_json text
) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    payload_bytes constant int := 7900;
    head text := tenant_id || ' ' || task_id || ' ' || status;
    body text;
    with_result text;
BEGIN
    body := json_build_object(
        'm', message,
        'c', (extract(epoch FROM created_at) * 1000000)::bigint,
        'u', (extract(epoch FROM last_updated_at) * 1000000)::bigint,
        't', ttl_ms,
        'p', poll_interval_ms,
        's', session_id,
        'o', tool,
        'k', progress_token)::text;
    IF octet_length(head) + octet_length(body) > payload_bytes THEN
        body := '{"x":true}';
    ELSIF result_json IS NOT NULL AND status IN ('completed', 'failed', 'cancelled') THEN
        with_result := left(body, -1) || ',"r":' || to_json(result_json)::text || '}';
        IF octet_length(head) + octet_length(with_result) <= payload_bytes THEN
            body := with_result;
        END IF;
    END IF;
    RETURN head || E'\n' || body;
END $$;

CREATE OR REPLACE FUNCTION taskstore_notify_task_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('taskstore_task_changed', taskstore_change_payload(
        NEW.tenant_id, NEW.task_id, NEW.status, NEW.status_message, NEW.created_at,
        NEW.last_updated_at, NEW.ttl_ms, NEW.poll_interval_ms, NEW.session_id, NEW.tool,
        NEW.progress_token, NEW.result_json));
    RETURN NULL;
END $$;
