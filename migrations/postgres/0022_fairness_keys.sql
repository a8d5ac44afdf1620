-- Fairness keys within a tenant (issue 40, item 2; docs/execution.md,
-- "The order"). A tool may declare a key (`arguments.customer_id`) whose
-- values take turns within a tenant when its tasks wait for room, as the
-- tenants take turns. Each task's key is computed when it is created and
-- kept with it (`tasks.fairness_key`), and each job's outbox row carries
-- it, so that the decision finds a tenant's keys through the index (a
-- loose scan per tenant) and reads the first jobs of each, not the
-- tenant's whole backlog. "C" collation: keys are compared, never shown.
--
-- Expand only: the previous release writes no key (its rows have '', one
-- key: first in, first out, as before) and its decisions read rows through
-- this index's leading columns.
ALTER TABLE tasks ADD COLUMN fairness_key text;
ALTER TABLE dispatch_outbox ADD COLUMN fairness_key text COLLATE "C" NOT NULL DEFAULT '';

DROP INDEX dispatch_outbox_ready;
CREATE INDEX dispatch_outbox_ready
    ON dispatch_outbox (tool, tenant_id, fairness_key, priority DESC, id) WHERE ready;
