-- Rows for get.sql to find: bench-1 .. bench-:rows.
INSERT INTO tasks (tenant_id, task_id, status, request_id_json, request_json,
                   created_at, last_updated_at, ttl_ms, expires_at, poll_interval_ms)
SELECT 'default', 'bench-' || i, 'working', '1', '{}', now(), now(), 3600000,
       now() + interval '1 hour', 1000
FROM generate_series(1, :rows) AS i
ON CONFLICT DO NOTHING;
