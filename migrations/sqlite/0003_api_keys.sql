-- API keys (`taskstore keys`); see migrations/postgres/0006_api_keys.sql.
CREATE TABLE api_keys (
    key_id        TEXT PRIMARY KEY,
    secret_sha256 BLOB NOT NULL,
    tenant_id     TEXT,
    role          TEXT NOT NULL CHECK (role IN ('client', 'worker', 'admin')),
    name          TEXT NOT NULL DEFAULT '',
    created_at    TEXT NOT NULL,
    revoked_at    TEXT
);
