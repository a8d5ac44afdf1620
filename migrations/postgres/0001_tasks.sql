-- Tasks of every tenant. PostgreSQL is the source of truth for task state.
--
-- Ids, tenants and sessions use the "C" collation: byte order is what the
-- keyset cursor compares, it is the same on every server whatever its locale,
-- and it is the fastest to compare.
CREATE TABLE tasks (
    tenant_id        text COLLATE "C" NOT NULL,
    task_id          text COLLATE "C" NOT NULL,
    session_id       text COLLATE "C",
    status           text NOT NULL,
    status_message   text,
    -- The JSON-RPC id and request that created the task, as the caller's
    -- exact JSON text (json/jsonb would reorder keys or renormalize numbers).
    request_id_json  text NOT NULL,
    request_json     text NOT NULL,
    result_json      text,
    created_at       timestamptz NOT NULL,
    last_updated_at  timestamptz NOT NULL,
    -- NULL: kept forever. Otherwise expires_at = created_at + ttl, moved to at
    -- least now() + ttl when the task reaches a terminal status.
    ttl_ms           bigint,
    expires_at       timestamptz,
    poll_interval_ms bigint NOT NULL,
    PRIMARY KEY (tenant_id, task_id),
    CONSTRAINT tasks_status_known
        CHECK (status IN ('working', 'input_required', 'completed', 'failed', 'cancelled')),
    CONSTRAINT tasks_ttl_positive CHECK (ttl_ms IS NULL OR ttl_ms > 0),
    CONSTRAINT tasks_expiry_follows_ttl CHECK ((ttl_ms IS NULL) = (expires_at IS NULL)),
    CONSTRAINT tasks_result_only_when_finished
        CHECK (result_json IS NULL OR status IN ('completed', 'failed'))
);

-- ListTasks keyset pagination, per tenant and per session.
CREATE INDEX tasks_tenant_listing ON tasks (tenant_id, created_at, task_id);
CREATE INDEX tasks_session_listing ON tasks (tenant_id, session_id, created_at, task_id)
    WHERE session_id IS NOT NULL;

-- CleanupExpired and the background sweep.
CREATE INDEX tasks_expiry ON tasks (expires_at) WHERE expires_at IS NOT NULL;

-- Secrets shared by every replica, created once (e.g. the cursor HMAC key).
CREATE TABLE store_secrets (
    name  text PRIMARY KEY,
    value bytea NOT NULL
);
