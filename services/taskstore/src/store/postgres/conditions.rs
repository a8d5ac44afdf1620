//! The task conditions the statements share, each written once as a SQL
//! fragment. Each takes an optional table alias (`live!("t.")`) for
//! statements that join.

/// Not expired, by the database clock.
macro_rules! live {
    () => {
        live!("")
    };
    ($t:literal) => {
        concat!("(", $t, "expires_at IS NULL OR ", $t, "expires_at > now())")
    };
}

/// An open status: the task can still change (not terminal).
macro_rules! open {
    () => {
        open!("")
    };
    ($t:literal) => {
        concat!($t, "status IN ('working', 'input_required')")
    };
}

/// A dispatched task that is still open: the predicate of the partial index
/// of open dispatched tasks (migration 0007), so a statement written with it
/// can use that index.
macro_rules! dispatched_open {
    () => {
        dispatched_open!("")
    };
    ($t:literal) => {
        concat!($t, "max_attempts IS NOT NULL AND ", open!($t))
    };
}

/// A job of the task's current generation may claim it: dispatched, open,
/// under no lease, live. (The generation is the caller's to compare.)
macro_rules! claimable {
    () => {
        claimable!("")
    };
    ($t:literal) => {
        concat!(
            dispatched_open!($t),
            " AND ",
            $t,
            "lease_token IS NULL AND ",
            live!($t)
        )
    };
}

/// Held under the lease bound as `$lease`: what a renewal, a release, a
/// question or a fenced result requires.
macro_rules! held_under {
    ($lease:literal) => {
        concat!("lease_token = ", $lease, " AND ", open!(), " AND ", live!())
    };
}

/// Reads `$columns` of the task `$1`/`$2` held under the lease `$3`, and
/// locks it: what `PgTaskStore::lock_held` runs.
macro_rules! lock_held_task {
    ($columns:expr) => {
        concat!(
            "SELECT ",
            $columns,
            " FROM tasks WHERE tenant_id = $1 AND task_id = $2 AND ",
            held_under!("$3"),
            " FOR UPDATE"
        )
    };
}

/// The task `$1`/`$2`, unexpired: what the worker's side and the dashboard
/// address (neither is restricted to a session).
macro_rules! live_task {
    () => {
        concat!("tenant_id = $1 AND task_id = $2 AND ", live!())
    };
}

/// The task's columns (and `$extra` ones) of a task its caller sees
/// (`visible_task!`).
macro_rules! select_visible {
    ($extra:literal) => {
        concat!(
            "SELECT ",
            task_columns!(),
            $extra,
            " FROM tasks WHERE ",
            visible_task!()
        )
    };
}

/// `tenant_id = $1 AND task_id = $2`, restricted to the session in `$3` when
/// it is not NULL, and to unexpired tasks.
macro_rules! visible_task {
    () => {
        concat!(
            "tenant_id = $1 AND task_id = $2 AND ($3::text IS NULL OR session_id = $3) AND ",
            live!()
        )
    };
}

/// A held attempt is alive: its own lease has not expired, or the worker
/// session it was claimed in has not (migration 0023). The session is
/// probed by primary key. `domain::attempt_alive` is the same rule.
macro_rules! lease_alive {
    () => {
        lease_alive!("")
    };
    ($t:literal) => {
        concat!(
            "(",
            $t,
            "lease_expires_at >= now() OR EXISTS (SELECT 1 FROM worker_sessions ws",
            " WHERE ws.session_id = ",
            $t,
            "lease_session AND ws.expires_at >= now()))"
        )
    };
}

/// The session `$s` names when it is alive, else NULL
/// (`domain::claim_binds_session`): what a claim (or a grant) records, so
/// that an attempt never names a session the reaper
/// cannot reach it from (an unknown session keeps nothing alive either
/// way; migration 0023).
macro_rules! live_session {
    ($s:literal) => {
        concat!(
            "(SELECT ws.session_id FROM worker_sessions ws WHERE ws.session_id = ",
            $s,
            " AND ws.expires_at >= now())"
        )
    };
}

/// The slot `$s` (a `dispatch_slots` row) still holds for its task `$t`:
/// the generation whose job took it is the task's current one, the task is
/// open (a question asked mid-attempt keeps it: the attempt may go on; a
/// park starts a new generation), and no
/// lease of it has expired (a killed worker's slot comes back when its
/// lease does). Memory's `Dispatch::holds_slot` is the same rule.
macro_rules! holds_slot {
    ($t:literal, $s:literal) => {
        concat!(
            $t,
            "dispatch_generation = ",
            $s,
            "generation AND ",
            open!($t),
            " AND (",
            $t,
            "lease_expires_at IS NULL OR ",
            lease_alive!($t),
            ") AND ",
            live!($t)
        )
    };
}
