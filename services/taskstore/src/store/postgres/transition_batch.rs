//! Group commit for status changes and results (UpdateTaskStatus,
//! StoreTaskResult, CancelTask): the ones that arrive together are applied by
//! one UPDATE and committed together, each under exactly the conditions of a
//! single change (visible in its scope, not terminal, its lease if fenced).
//! Two changes of one task never share a statement: the later one waits for
//! the next batch, so it sees the first one's outcome as it would alone.

use std::collections::{HashMap, HashSet};

use sqlx::PgPool;
use tokio::sync::mpsc;

use super::batch_writer;
use super::feed::{Quiet, Reach, unheard};
use super::history::history_ended;
use super::rows::{TaskRow, task_columns};
use crate::domain::{Effects, Fence, JsonObject, Scope, TaskId, TaskStatus};
use crate::error::StoreError;
use crate::store::statements::sql;

/// Most changes per statement.
const MAX_BATCH: usize = 256;

/// One change: the task (in its scope), its new status and message, the
/// result for a terminal one, and its fence (`domain::Fence`): the lease
/// that must still be the task's, or, for a report without one, that no
/// worker runs the task and nobody holds it.
#[derive(Debug, Clone)]
pub(super) struct Change {
    pub tenant: String,
    pub task_id: String,
    pub session: Option<String>,
    pub status: TaskStatus,
    pub terminal: bool,
    pub message: Option<String>,
    pub result: Option<String>,
    pub fence: Option<String>,
    /// A report without a lease: only on a task never dispatched nor held.
    pub unheld: bool,
}

impl Change {
    /// A report's effects (`Effects::of_report`) on the task `task_id` in
    /// `scope`, under `fence`. The statement ends the running attempt's
    /// record with the task's new status and message, as `of_report` says.
    pub(super) fn of_report(
        scope: &Scope,
        task_id: &TaskId,
        effects: Effects,
        fence: Fence<'_>,
    ) -> Result<Change, StoreError> {
        let status = effects
            .status
            .ok_or_else(|| StoreError::Internal("a report without a status".into()))?;
        Ok(Change {
            tenant: scope.tenant.as_str().to_owned(),
            task_id: task_id.as_str().to_owned(),
            session: scope.session.as_ref().map(|s| s.as_str().to_owned()),
            status,
            terminal: effects.attempt_ended.is_some(),
            message: effects.message.flatten(),
            result: effects.result.map(JsonObject::into_string),
            fence: fence.lease().map(|f| f.as_str().to_owned()),
            unheld: fence == Fence::Unheld,
        })
    }
}

/// A change waiting for its batch; no row in the reply when it changed
/// nothing (the caller asks why).
pub(super) type PendingChange = batch_writer::Pending<Change, TaskRow>;

#[derive(sqlx::FromRow)]
struct ChangedRow {
    tenant_id: String,
    #[sqlx(flatten)]
    task: TaskRow,
    progress_token: Option<String>,
    /// Made without a notification: this replica tells its subscribers.
    quiet: bool,
}

/// Starts the writer; it ends when every sender is dropped.
pub(super) fn spawn(pool: PgPool, quiet: Quiet) -> mpsc::Sender<PendingChange> {
    batch_writer::spawn(MAX_BATCH, one_change_per_task, move |batch| {
        let pool = pool.clone();
        let quiet = quiet.clone();
        async move { apply_batch(&pool, &quiet, batch).await }
    })
}

fn one_change_per_task(batch: Vec<PendingChange>) -> (Vec<PendingChange>, Vec<PendingChange>) {
    batch_writer::one_per_key(batch, |change| {
        (change.tenant.clone(), change.task_id.clone())
    })
}

async fn apply_batch(pool: &PgPool, quiet: &Quiet, batch: Vec<PendingChange>) {
    let changes: Vec<Change> = batch.iter().map(|p| p.request.clone()).collect();
    let outcome = apply(pool, quiet, &changes).await;
    batch_writer::answer(batch, outcome, |change| (change.tenant, change.task_id));
}

/// The statement, over a source `c` of changes.
macro_rules! apply_sql {
    ($source:expr) => {
        concat!(
            "UPDATE tasks SET status = c.new_status, status_message = c.new_message,",
            " result_json = c.new_result,",
            " last_updated_at = GREATEST(now(), last_updated_at + interval '1 microsecond'),",
            " expires_at = CASE WHEN c.terminal",
            "   THEN GREATEST(expires_at, now() + ttl_ms * interval '1 millisecond')",
            "   ELSE expires_at END,",
            // The attempt running when the task ends ends with it: with the
            // result (its status and message) or the cancellation.
            " attempt_history = CASE WHEN c.terminal THEN ",
            history_ended!("attempt_history", "c.new_status", "c.new_message"),
            " ELSE attempt_history END,",
            " quiet_changes = quiet_changes + c.quiet::int",
            " FROM (SELECT s.*, ",
            unheard!("s.c_tenant", "$10"),
            " AS quiet FROM ",
            $source,
            "   AS s(c_tenant, c_task, c_session, new_status, new_message, new_result, terminal,",
            "        fence, unheld)) c",
            " WHERE tenant_id = c.c_tenant AND task_id = c.c_task",
            " AND (c.c_session IS NULL OR session_id = c.c_session)",
            " AND ",
            live!(),
            " AND ",
            open!(),
            // The fence (`domain::Fence::admits`); a held task has
            // max_attempts set, as a dispatched one has.
            " AND CASE WHEN c.fence IS NOT NULL THEN lease_token = c.fence",
            "   WHEN c.unheld THEN max_attempts IS NULL ELSE true END",
            " RETURNING tenant_id, progress_token, c.quiet, ",
            task_columns!()
        )
    };
}

/// Applies what can be applied in one statement; the rows changed, by
/// (tenant, task id): a batch holds one change per task. Reaching a terminal status re-arms the expiry
/// to at least `ttl` from now. A batch of one (the usual case at low load)
/// binds plain values: PostgreSQL plans that several times faster than a
/// join over arrays.
async fn apply(
    pool: &PgPool,
    quiet: &Quiet,
    changes: &[Change],
) -> Result<HashMap<(String, String), TaskRow>, sqlx::Error> {
    let changed = if let [one] = changes {
        sqlx::query_as::<_, ChangedRow>(sql!(apply_sql!(
            "(VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::bool, $8::text, $9::bool))"
        )))
        .bind(&one.tenant)
        .bind(&one.task_id)
        .bind(&one.session)
        .bind(one.status.as_str())
        .bind(&one.message)
        .bind(&one.result)
        .bind(one.terminal)
        .bind(&one.fence)
        .bind(one.unheld)
        .bind(quiet.me())
        .fetch_all(pool)
        .await?
    } else {
        let text = |f: fn(&Change) -> Option<String>| changes.iter().map(f).collect::<Vec<_>>();
        let terminal: Vec<bool> = changes.iter().map(|c| c.terminal).collect();
        let unheld: Vec<bool> = changes.iter().map(|c| c.unheld).collect();
        sqlx::query_as::<_, ChangedRow>(sql!(apply_sql!(
            "unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bool[], $8::text[], $9::bool[])"
        )))
        .persistent(false) // planned for its arrays: batch_writer.rs, "Plans"
        .bind(text(|c| Some(c.tenant.clone())))
        .bind(text(|c| Some(c.task_id.clone())))
        .bind(text(|c| c.session.clone()))
        .bind(text(|c| Some(c.status.as_str().to_owned())))
        .bind(text(|c| c.message.clone()))
        .bind(text(|c| c.result.clone()))
        .bind(&terminal)
        .bind(text(|c| c.fence.clone()))
        .bind(&unheld)
        .bind(quiet.me())
        .fetch_all(pool)
        .await?
    };
    // Before the replies, so that this replica's subscribers hear of the
    // change before anything its caller does next.
    // A stored result's waiting calls are handed the result itself
    // (`store_result`): they hear nothing here that would make them read it.
    let with_result: HashSet<(&str, &str)> = changes
        .iter()
        .filter(|c| c.result.is_some())
        .map(|c| (c.tenant.as_str(), c.task_id.as_str()))
        .collect();
    for row in changed.iter().filter(|row| row.quiet) {
        let reach = if with_result.contains(&(row.tenant_id.as_str(), row.task.task_id())) {
            Reach::TenantFollowers
        } else {
            Reach::Everyone
        };
        quiet.tell(
            &row.tenant_id,
            &row.task,
            row.progress_token.as_deref(),
            reach,
        );
    }
    Ok(changed
        .into_iter()
        .map(|row| ((row.tenant_id, row.task.task_id().to_owned()), row.task))
        .collect())
}
