-- The SQL work of one CreateTask: one task row, one transaction (autocommit),
-- committed durably (synchronous_commit stays on).
\set n random(1, 2000000000)
INSERT INTO tasks (tenant_id, task_id, session_id, status, request_id_json, request_json,
                   created_at, last_updated_at, ttl_ms, expires_at, poll_interval_ms)
VALUES ('default', md5(:n::text || clock_timestamp()::text), NULL, 'working', '1',
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bench","arguments":{"n":1}}}',
        now(), now(), 3600000, now() + interval '1 hour', 1000);
