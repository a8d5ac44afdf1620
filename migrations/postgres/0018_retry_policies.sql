-- Retry policies per tool (issue 40): a dispatched task keeps the retry
-- policy its tool's workers declared when it was created (attempts, backoff
-- bounds, which failures run again), as compact JSON. NULL, for almost
-- every task, is the service's policy.
--
-- Expand only: the previous release neither writes nor reads the column
-- during a rolling upgrade; a task it ends meanwhile follows the service's
-- policy, as every task did before.
ALTER TABLE tasks ADD COLUMN retry_policy text;
