-- When each API key was last accepted (at most a minute stale: each replica
-- records a key's use at most once a minute), so that an operator rotating
-- a key sees when the old one stopped being used (`taskstore keys list`).
-- Expand only: binaries before this migration ignore the column.
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
