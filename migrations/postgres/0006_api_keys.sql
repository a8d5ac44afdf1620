-- API keys (`taskstore keys`). Only a digest of each key is kept: a key is
-- 256 random bits, so SHA-256 is enough (there is nothing to brute-force),
-- and checking one costs microseconds on every RPC.
CREATE TABLE api_keys (
    key_id        text PRIMARY KEY,
    secret_sha256 bytea NOT NULL,
    -- NULL: every tenant (fleet workers, operators).
    tenant_id     text,
    role          text NOT NULL CHECK (role IN ('client', 'worker', 'admin')),
    name          text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz
);
