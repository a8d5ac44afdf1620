-- Liveness per worker, fencing per task (issue 41, item 1; docs/execution.md,
-- "Leases"). A worker process opens a session and renews it, one row, every
-- lease / 3, whatever the number of its attempts. A claim made in a session
-- records it (`tasks.lease_session`): the attempt is alive while its own
-- lease has not expired (as before: workers renewing each task) or its
-- session has not. Every report is still fenced by the attempt's
-- `lease_token`.
--
-- `lease_session` is deliberately not indexed: claims stay HOT updates. The
-- reaper reads the open dispatched tasks through `tasks_open_dispatched`
-- and probes each expired lease's session by primary key.
--
-- Expand only: the previous release never sets `lease_session` (its
-- attempts live by their own lease) and never reads `worker_sessions`.
CREATE TABLE worker_sessions (
    session_id text PRIMARY KEY,
    worker_id text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX worker_sessions_expiry ON worker_sessions (expires_at);

ALTER TABLE tasks ADD COLUMN lease_session text;
