//! Group commit for ClaimTask: the claims that arrive together (many
//! workers, many free slots) are decided by one UPDATE over all of them and
//! committed together. Each claim still gets its own lease token and attempt
//! number and is fenced exactly as a single claim is (generation, status, no
//! live lease); of several claims of one task in a batch, one wins.

use std::collections::HashMap;

use sqlx::PgPool;
use tokio::sync::mpsc;

use super::batch_writer;
use super::feed::{Quiet, Reach, unheard};
use super::history::history_started;
use super::rows::{TaskRow, task_columns};
use crate::domain::RUNNING_MESSAGE_FORMAT;
use crate::store::statements::sql;

/// Most claims per statement.
const MAX_BATCH: usize = 256;

/// One claim: its task, the job's generation, and the lease it would take.
#[derive(Debug, Clone)]
pub(super) struct ClaimRequest {
    pub tenant: String,
    pub task_id: String,
    pub generation: i64,
    pub lease_token: String,
    pub worker: String,
    /// The worker session it is claimed in, if any.
    pub session: Option<String>,
}

/// What a successful claim read from the task.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct ClaimedRow {
    pub lease_token: String,
    pub attempt: i32,
    pub max_attempts: i32,
    pub tool: String,
    pub request_json: String,
    pub waited_ms: f64,
    /// The claim was bound to its (live) worker session.
    pub in_session: bool,
    /// The task as the claim left it, for this replica's subscribers when
    /// the claim was quiet.
    tenant_id: String,
    #[sqlx(flatten)]
    task: TaskRow,
    progress_token: Option<String>,
    quiet: bool,
}

/// A claim waiting for its batch; no row in the reply when it was refused.
pub(super) type PendingClaim = batch_writer::Pending<ClaimRequest, ClaimedRow>;

/// Starts the writer; leases last `lease_ms`.
pub(super) fn spawn(pool: PgPool, lease_ms: i64, quiet: Quiet) -> mpsc::Sender<PendingClaim> {
    batch_writer::spawn(MAX_BATCH, batch_writer::nothing_waits, move |batch| {
        let pool = pool.clone();
        let quiet = quiet.clone();
        async move { claim_batch(&pool, lease_ms, &quiet, batch).await }
    })
}

async fn claim_batch(pool: &PgPool, lease_ms: i64, quiet: &Quiet, batch: Vec<PendingClaim>) {
    let requests: Vec<ClaimRequest> = batch.iter().map(|p| p.request.clone()).collect();
    let outcome = claim_rows(pool, lease_ms, quiet, &requests).await;
    if let Ok(claimed) = &outcome {
        // Before the replies, so that this replica's subscribers hear of the
        // claim before anything the worker does next.
        for row in claimed.values().filter(|row| row.quiet) {
            quiet.tell(
                &row.tenant_id,
                &row.task,
                row.progress_token.as_deref(),
                Reach::Everyone,
            );
        }
    }
    batch_writer::answer(batch, outcome, |request| request.lease_token);
}

/// The statement, over a source `c` of claims.
macro_rules! claim_sql {
    ($source:expr) => {
        concat!(
            "UPDATE tasks t SET attempt = t.attempt + 1, lease_token = c.lease_token,",
            " lease_owner = c.worker, lease_session = ",
            live_session!("c.session"),
            ",",
            " lease_expires_at = now() + $6 * interval '1 millisecond',",
            " status_message = format($7, c.worker, t.attempt + 1, t.max_attempts),",
            " last_updated_at = GREATEST(now(), t.last_updated_at + interval '1 microsecond'),",
            " attempt_history = ",
            history_started!("t.attempt_history", "(t.attempt + 1)", "c.worker"),
            ", quiet_changes = t.quiet_changes + c.quiet::int",
            " FROM (SELECT s.*, ",
            unheard!("s.c_tenant", "$8"),
            " AS quiet FROM ",
            $source,
            "   AS s(c_tenant, c_task, generation, lease_token, worker, session)) c",
            " WHERE t.tenant_id = c.c_tenant AND t.task_id = c.c_task",
            " AND t.dispatch_generation = c.generation AND ",
            claimable!("t."),
            " RETURNING c.lease_token, t.attempt, t.max_attempts, t.request_json,",
            " (extract(epoch FROM now() - t.created_at) * 1000)::float8 AS waited_ms,",
            " t.lease_session IS NOT NULL AS in_session,",
            " t.tenant_id, t.progress_token, c.quiet, ",
            task_columns!("t.")
        )
    };
}

/// Claims what can be claimed in one statement; the claims that won, by
/// their lease token. Each claim starts a record in the task's attempt
/// history in the same UPDATE. The status message is
/// `domain::RUNNING_MESSAGE_FORMAT` filled here, where the attempt number is
/// known. A batch of one binds plain values (planned
/// several times faster than a join over arrays).
async fn claim_rows(
    pool: &PgPool,
    lease_ms: i64,
    quiet: &Quiet,
    requests: &[ClaimRequest],
) -> Result<HashMap<String, ClaimedRow>, sqlx::Error> {
    let claimed = if let [one] = requests {
        sqlx::query_as::<_, ClaimedRow>(sql!(claim_sql!(
            "(VALUES ($1::text, $2::text, $3::bigint, $4::text, $5::text, $9::text))"
        )))
        .bind(&one.tenant)
        .bind(&one.task_id)
        .bind(one.generation)
        .bind(&one.lease_token)
        .bind(&one.worker)
        .bind(lease_ms)
        .bind(RUNNING_MESSAGE_FORMAT)
        .bind(quiet.me())
        .bind(&one.session)
        .fetch_all(pool)
        .await?
    } else {
        let column = |f: fn(&ClaimRequest) -> String| requests.iter().map(f).collect::<Vec<_>>();
        let generations: Vec<i64> = requests.iter().map(|r| r.generation).collect();
        sqlx::query_as::<_, ClaimedRow>(sql!(claim_sql!(
            "unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $9::text[])"
        )))
        .persistent(false) // planned for its arrays: batch_writer.rs, "Plans"
        .bind(column(|r| r.tenant.clone()))
        .bind(column(|r| r.task_id.clone()))
        .bind(&generations)
        .bind(column(|r| r.lease_token.clone()))
        .bind(column(|r| r.worker.clone()))
        .bind(lease_ms)
        .bind(RUNNING_MESSAGE_FORMAT)
        .bind(quiet.me())
        .bind(
            requests
                .iter()
                .map(|r| r.session.clone())
                .collect::<Vec<_>>(),
        )
        .fetch_all(pool)
        .await?
    };
    Ok(claimed
        .into_iter()
        .map(|row| (row.lease_token.clone(), row))
        .collect())
}
