//! Batched reads of one task each (`GetTask`, `tasks/get`: what MCP clients
//! poll at their poll interval). The reads that arrive together are answered
//! by one SELECT over all of them, so thousands of polls a second cost
//! PostgreSQL a statement per batch rather than one per poll (issue 41,
//! item 4; BENCHMARKS.md, "Polls").
//!
//! Each read is still a fresh read: its statement starts after the read
//! arrived, so it sees every change acknowledged before it, on any replica,
//! and never an older state than an earlier read saw. A cache of tasks kept
//! by the change feed could answer without a round trip, but the feed lags
//! its commits: to know that it holds every change acknowledged before a
//! read, a replica must ask the database (a barrier through the feed), a
//! round trip again (docs/long-running-tasks.md, item 4).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use sqlx::PgPool;
use tokio::sync::mpsc;

use super::batch_writer::{self, Pending};
use super::rows::{TaskRow, task_columns};
use crate::domain::{Scope, TaskId};
use crate::error::StoreError;
use crate::store::statements::sql;

/// Most reads per statement.
const MAX_BATCH: usize = 256;

/// Readers working at once, each one statement in flight: PostgreSQL's
/// cores are used while a batch of reads waits for the one before it.
const READERS: usize = 2;

/// One read: the task, in its scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Read {
    tenant: String,
    task_id: String,
    session: Option<String>,
}

impl Read {
    pub(super) fn of(scope: &Scope, task_id: &TaskId) -> Self {
        Self {
            tenant: scope.tenant.as_str().to_owned(),
            task_id: task_id.as_str().to_owned(),
            session: scope.session.as_ref().map(|s| s.as_str().to_owned()),
        }
    }
}

type PendingRead = Pending<Read, TaskRow>;

/// The readers, taken in turn.
#[derive(Debug, Clone)]
pub(super) struct Readers {
    senders: Arc<[mpsc::Sender<PendingRead>]>,
    next: Arc<AtomicUsize>,
}

impl Readers {
    pub(super) fn spawn(pool: &PgPool) -> Self {
        let senders: Vec<_> = (0..READERS)
            .map(|_| {
                let pool = pool.clone();
                // Two reads of one task in a batch: the later waits for the
                // next (each caller gets its own row).
                batch_writer::spawn(
                    MAX_BATCH,
                    |batch| batch_writer::one_per_key(batch, Read::clone),
                    move |batch| {
                        let pool = pool.clone();
                        async move { read_batch(&pool, batch).await }
                    },
                )
            })
            .collect();
        Self {
            senders: senders.into(),
            next: Arc::default(),
        }
    }

    /// The task `read` names, or NOT_FOUND when it is not visible there.
    pub(super) async fn read(&self, read: Read) -> Result<TaskRow, StoreError> {
        let turn = self.next.fetch_add(1, Ordering::Relaxed) % self.senders.len();
        batch_writer::submit(&self.senders[turn], read)
            .await?
            .ok_or(StoreError::NotFound)
    }
}

async fn read_batch(pool: &PgPool, batch: Vec<PendingRead>) {
    let reads: Vec<Read> = batch.iter().map(|p| p.request.clone()).collect();
    let outcome = read_rows(pool, &reads).await;
    batch_writer::answer(batch, outcome, |read| read);
}

/// A task found, with the read that found it.
#[derive(Debug, sqlx::FromRow)]
struct FoundRow {
    r_tenant: String,
    r_task: String,
    r_session: Option<String>,
    #[sqlx(flatten)]
    task: TaskRow,
}

/// The visible tasks of `reads`, by read. A batch of one binds plain values
/// and keeps its plan; a larger one is planned for its arrays (unnamed, as
/// `batch_writer` explains).
async fn read_rows(pool: &PgPool, reads: &[Read]) -> Result<HashMap<Read, TaskRow>, sqlx::Error> {
    if let [one] = reads {
        let found = sqlx::query_as::<_, TaskRow>(sql!(select_visible!("")))
            .bind(&one.tenant)
            .bind(&one.task_id)
            .bind(one.session.as_deref())
            .fetch_optional(pool)
            .await?;
        return Ok(found.map(|row| (one.clone(), row)).into_iter().collect());
    }
    let tenants: Vec<&str> = reads.iter().map(|r| r.tenant.as_str()).collect();
    let tasks: Vec<&str> = reads.iter().map(|r| r.task_id.as_str()).collect();
    let sessions: Vec<Option<&str>> = reads.iter().map(|r| r.session.as_deref()).collect();
    let found = sqlx::query_as::<_, FoundRow>(sql!(concat!(
        "SELECT r.tenant AS r_tenant, r.task AS r_task, r.session AS r_session, ",
        task_columns!("t."),
        " FROM unnest($1::text[], $2::text[], $3::text[]) AS r(tenant, task, session)",
        " JOIN tasks t ON t.tenant_id = r.tenant AND t.task_id = r.task",
        " AND (r.session IS NULL OR t.session_id = r.session) AND ",
        live!("t.")
    )))
    .bind(tenants)
    .bind(tasks)
    .bind(sessions)
    .persistent(false)
    .fetch_all(pool)
    .await?;
    Ok(found
        .into_iter()
        .map(|row| {
            let read = Read {
                tenant: row.r_tenant,
                task_id: row.r_task,
                session: row.r_session,
            };
            (read, row.task)
        })
        .collect())
}
