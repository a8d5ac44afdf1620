-- The SQL work of one GetTask: one select by primary key.
\set id random(1, :rows)
SELECT task_id, session_id, status, status_message, created_at, last_updated_at, ttl_ms, poll_interval_ms
FROM tasks
WHERE tenant_id = 'default' AND task_id = 'bench-' || :id
  AND (expires_at IS NULL OR expires_at > now());
