-- The read-only `viewer` role; see migrations/postgres/0013_viewer_role.sql.
-- SQLite cannot change a CHECK constraint: the table is rebuilt.
CREATE TABLE api_keys_new (
    key_id        TEXT PRIMARY KEY,
    secret_sha256 BLOB NOT NULL,
    tenant_id     TEXT,
    role          TEXT NOT NULL CHECK (role IN ('client', 'worker', 'admin', 'viewer')),
    name          TEXT NOT NULL DEFAULT '',
    created_at    TEXT NOT NULL,
    revoked_at    TEXT,
    last_used_at  TEXT
);
INSERT INTO api_keys_new (key_id, secret_sha256, tenant_id, role, name, created_at, revoked_at, last_used_at)
    SELECT key_id, secret_sha256, tenant_id, role, name, created_at, revoked_at, last_used_at FROM api_keys;
DROP TABLE api_keys;
ALTER TABLE api_keys_new RENAME TO api_keys;
