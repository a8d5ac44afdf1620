-- Dispatch to workers (docs/execution.md).
--
-- A dispatched task has a tool. Each dispatch of it is a new generation; a
-- job message carries the generation it was made for, and only a claim for
-- the current generation succeeds, so stale and duplicated messages are
-- dropped by the claim instead of running twice.
ALTER TABLE tasks
    ADD COLUMN tool                text,
    ADD COLUMN max_attempts        integer,
    -- Claims so far (an attempt per claim; a shutdown release gives it back).
    ADD COLUMN attempt             integer NOT NULL DEFAULT 0,
    ADD COLUMN dispatch_generation bigint  NOT NULL DEFAULT 0,
    -- The current claim. Reports from a worker are accepted only with this
    -- token; the reaper clears it when the lease expires.
    ADD COLUMN lease_token         text,
    ADD COLUMN lease_owner         text,
    ADD COLUMN lease_expires_at    timestamptz,
    ADD CONSTRAINT tasks_dispatch_complete
        CHECK ((tool IS NULL) = (max_attempts IS NULL)),
    ADD CONSTRAINT tasks_lease_complete
        CHECK ((lease_token IS NULL) = (lease_expires_at IS NULL));

-- The lease reaper looks for claims whose lease ran out.
CREATE INDEX tasks_lease_expiry ON tasks (lease_expires_at) WHERE lease_expires_at IS NOT NULL;

-- The transactional outbox: a job row is written in the same transaction as
-- the task (or its re-dispatch) and deleted once RabbitMQ confirmed it.
CREATE TABLE dispatch_outbox (
    id           bigserial PRIMARY KEY,
    tenant_id    text COLLATE "C" NOT NULL,
    task_id      text COLLATE "C" NOT NULL,
    generation   bigint NOT NULL,
    tool         text NOT NULL,
    -- Not before (retry backoff, or a wait for a worker that serves the tool).
    available_at timestamptz NOT NULL DEFAULT now(),
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dispatch_outbox_due ON dispatch_outbox (available_at, id);

-- Wake every replica's relay when a job is written.
CREATE FUNCTION taskstore_notify_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('taskstore_outbox', '');
    RETURN NULL;
END $$;
CREATE TRIGGER dispatch_outbox_notify AFTER INSERT ON dispatch_outbox
    FOR EACH STATEMENT EXECUTE FUNCTION taskstore_notify_outbox();

-- Tell every replica which task changed (WatchTask, blocking GetTaskResult,
-- cancellation reaching workers). Delivered on commit. The payload is
-- "<tenant> <task id>": neither may contain a space.
CREATE FUNCTION taskstore_notify_task_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('taskstore_task_changed', NEW.tenant_id || ' ' || NEW.task_id);
    RETURN NULL;
END $$;
CREATE TRIGGER tasks_notify_changed AFTER UPDATE ON tasks
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status
          OR OLD.status_message IS DISTINCT FROM NEW.status_message
          OR OLD.last_updated_at IS DISTINCT FROM NEW.last_updated_at)
    EXECUTE FUNCTION taskstore_notify_task_changed();
