-- Who announced each worker (issue 37): the tenants its credentials reach,
-- '*' for every tenant (a fleet, or no authentication) or one tenant's id.
-- The registry files a worker under its id *and* that reach, so that a
-- worker bound to one tenant can neither overwrite nor forget another
-- identity's worker, and its tools are listed to its own tenant only.
--
-- The key stays `worker_id` (expand only: the previous release keeps
-- writing and reading this table during a rolling upgrade). A tenant-bound
-- worker's row is keyed `<tenant> U+001F <id>`: worker ids and tenant ids
-- never contain control characters, so no key of one reach can be another
-- reach's. The previous release, meanwhile, files every worker it hears
-- under its plain id with reach '*', as it always did.
ALTER TABLE workers ADD COLUMN reach text COLLATE "C" NOT NULL DEFAULT '*';

-- Whether the worker consumes its tools' queues now (issue 38): one that
-- cannot reach the job queue is listed, but serves nothing. The previous
-- release writes no value: its workers count as consuming, as before.
ALTER TABLE workers ADD COLUMN consuming boolean NOT NULL DEFAULT true;

-- Dashboard sessions ended by logging out (issue 37): a session's cookie
-- names its random id; every replica refuses an id listed here until the
-- session would have expired anyway, after which the row is deleted.
CREATE TABLE dashboard_ended_sessions (
    session_id text COLLATE "C" PRIMARY KEY,
    ended_until timestamptz NOT NULL
);
