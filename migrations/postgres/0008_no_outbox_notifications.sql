-- Every insert into the outbox notified every replica's relay. The replica
-- that writes a job wakes its own relay in process, so the notification only
-- made the other replicas' relays race for the same rows (and the writer's
-- own relay run once more for nothing). Worse, a transaction that notifies
-- holds PostgreSQL's notify-queue lock from before its commit until after
-- it, so concurrent creates were serialized with their WAL flushes, and the
-- statement trigger fired even for creates that dispatch nothing.
--
-- Now a job is relayed at once by the replica that wrote it, and any replica
-- relays whatever is due when it polls (--relay-poll-interval, 1 s): that
-- covers a replica that crashed after its commit, or whose broker connection
-- is down. Replicas of the previous version keep working (they wake their own
-- relay in process too and poll the same way).

DROP TRIGGER dispatch_outbox_notify ON dispatch_outbox;
DROP FUNCTION taskstore_notify_outbox();
