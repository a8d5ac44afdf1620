-- The SQLite file of the in-process engine (`taskstore dev`): every change is
-- written through, and everything is loaded back at startup. One row per
-- task holds its record as JSON (`StoredRecord` in store/memory/persist.rs).
CREATE TABLE tasks (
    tenant_id TEXT NOT NULL,
    task_id   TEXT NOT NULL,
    record    TEXT NOT NULL,
    PRIMARY KEY (tenant_id, task_id)
) WITHOUT ROWID;

-- Secrets kept across restarts (the cursor HMAC key).
CREATE TABLE store_secrets (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
