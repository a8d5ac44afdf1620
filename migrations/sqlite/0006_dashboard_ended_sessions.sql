-- Dashboard sessions ended by logging out; see
-- migrations/postgres/0016_workers_by_reach_and_ended_sessions.sql.
CREATE TABLE dashboard_ended_sessions (
    session_id  TEXT PRIMARY KEY,
    ended_until TEXT NOT NULL
);
