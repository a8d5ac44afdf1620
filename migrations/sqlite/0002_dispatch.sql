-- The outbox of jobs for workers (`StoredJob` in store/memory/persist.rs).
CREATE TABLE dispatch_outbox (
    id  INTEGER PRIMARY KEY,
    job TEXT NOT NULL
);
