-- The outbox trigger notified once per INSERT statement, even one that
-- inserted no job: every create (dispatched or not) goes through the same
-- statement, whose outbox part inserts nothing for a task that is not
-- dispatched. A transaction that notifies takes PostgreSQL's notify-queue
-- lock from before its commit until after it, so concurrent committers that
-- notify are serialized with their WAL flushes: creates of tasks that run
-- nothing paid for a wake-up no relay needed. Notify only when jobs were
-- written (a transition table says how many).

DROP TRIGGER dispatch_outbox_notify ON dispatch_outbox;

CREATE OR REPLACE FUNCTION taskstore_notify_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM new_jobs) THEN
        PERFORM pg_notify('taskstore_outbox', '');
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER dispatch_outbox_notify AFTER INSERT ON dispatch_outbox
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION taskstore_notify_outbox();
