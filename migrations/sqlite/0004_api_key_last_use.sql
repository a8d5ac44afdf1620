-- When each API key was last accepted; see
-- migrations/postgres/0010_api_key_last_use.sql.
ALTER TABLE api_keys ADD COLUMN last_used_at TEXT;
