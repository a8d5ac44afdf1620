-- A task change's notification names the schema it was made in ("n" in
-- the body), and a listener drops the changes of other schemas. NOTIFY is
-- database-wide: deployments sharing one database under different schemas
-- (as the test suite does, a schema per test) heard each other's changes,
-- so a follower could be shown a task of another deployment whose tenant
-- had the same name: its existence, its status message.
--
-- `current_schema()` is the schema of the writer's search_path, where its
-- `tasks` table is; a listener asks its own connection the same (every
-- connection of a deployment has the same options). STABLE now that it
-- reads it.
--
-- Expand only: the previous release ignores the key (and still hears
-- every schema, as before); a payload without it (the previous release's
-- trigger during a rolling upgrade) is heard by every schema.
CREATE OR REPLACE FUNCTION taskstore_change_payload(
    tenant_id text, task_id text, status text, message text, created_at timestamptz,
    last_updated_at timestamptz, ttl_ms bigint, poll_interval_ms bigint, session_id text,
    tool text, progress_token text, result_json text
) RETURNS text LANGUAGE plpgsql STABLE AS $$
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
        'k', progress_token,
        'n', current_schema())::text;
    IF octet_length(head) + octet_length(body) > payload_bytes THEN
        body := json_build_object('x', true, 'n', current_schema())::text;
    ELSIF result_json IS NOT NULL AND status IN ('completed', 'failed', 'cancelled') THEN
        with_result := left(body, -1) || ',"r":' || to_json(result_json)::text || '}';
        IF octet_length(head) + octet_length(with_result) <= payload_bytes THEN
            body := with_result;
        END IF;
    END IF;
    RETURN head || E'\n' || body;
END $$;
