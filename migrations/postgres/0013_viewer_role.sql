-- A read-only `viewer` role for API keys: tasks, results, questions and
-- tools, nothing changed (dashboards, on-call people, auditors).
--
-- Rolling upgrade: a replica from before this migration does not know the
-- role, so it refuses a viewer key as it refuses an unknown key; create
-- viewer keys once every replica runs this release.
ALTER TABLE api_keys DROP CONSTRAINT api_keys_role_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role_check
    CHECK (role IN ('client', 'worker', 'admin', 'viewer'));
