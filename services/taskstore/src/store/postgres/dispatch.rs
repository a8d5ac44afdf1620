//! The service's side of the execution protocol on PostgreSQL: the lease
//! reaper and the outbox relay. Both take their rows with `FOR UPDATE SKIP
//! LOCKED`, so replicas running them at once share the work without
//! touching a row twice.

use std::sync::Arc;

use async_trait::async_trait;
use sqlx::{Postgres, Transaction};
use taskstore_proto::jobs::JobMessage;
use tokio::sync::Notify;

use super::PgTaskStore;
use super::error::store_error;
use super::execution::{HeldRow, held_columns, millis};
use crate::domain::{AttemptEnd, NextStep, waiting_for_worker_message};
use crate::error::StoreError;
use crate::store::execution::{DispatchStore, JobPublisher, Published, log_held_for_worker};

/// Most expired leases handled per reaper transaction.
const REAP_BATCH: i64 = 100;

#[derive(sqlx::FromRow)]
struct OutboxRow {
    id: i64,
    tenant_id: String,
    task_id: String,
    generation: i64,
    tool: String,
    stale: bool,
    trace_context: Option<String>,
}

impl PgTaskStore {
    async fn reap_batch(&self) -> Result<u64, StoreError> {
        let mut tx = self.pool().begin().await.map_err(store_error)?;
        let expired = sqlx::query_as::<_, HeldRow>(concat!(
            "SELECT ",
            held_columns!(),
            " FROM tasks",
            // `max_attempts IS NOT NULL` and the statuses match the partial
            // index of open dispatched tasks (migration 0007): the lease's
            // expiry is deliberately not indexed, so claims stay HOT updates.
            " WHERE max_attempts IS NOT NULL AND status IN ('working', 'input_required')",
            " AND lease_expires_at < now() AND ",
            live!(),
            " ORDER BY lease_expires_at LIMIT $1 FOR UPDATE SKIP LOCKED"
        ))
        .bind(REAP_BATCH)
        .fetch_all(&mut *tx)
        .await
        .map_err(store_error)?;
        for lost in &expired {
            match self
                .end_attempt(&mut tx, lost, &AttemptEnd::LeaseExpired)
                .await?
            {
                NextStep::Fail { .. } => {
                    tracing::warn!(task_id = %lost.task_id, attempts = lost.attempt, "lease expired on the last attempt; task failed");
                }
                NextStep::Redispatch { .. } => {
                    tracing::warn!(task_id = %lost.task_id, attempt = lost.attempt, "lease expired; dispatching again");
                }
                // A lost lease is never a park.
                NextStep::Park { .. } | NextStep::Unchanged => {}
            }
        }
        tx.commit().await.map_err(store_error)?;
        Ok(expired.len() as u64)
    }
}

#[async_trait]
impl DispatchStore for PgTaskStore {
    async fn reap_expired_leases(&self) -> Result<u64, StoreError> {
        let mut total = 0;
        loop {
            let reaped = self.reap_batch().await?;
            total += reaped;
            if reaped < REAP_BATCH as u64 {
                if total > 0 {
                    self.outbox.notify_one();
                }
                return Ok(total);
            }
        }
    }

    async fn relay_due_jobs(
        &self,
        publisher: &dyn JobPublisher,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let mut tx = self.pool().begin().await.map_err(store_error)?;
        // A job is stale when its task is gone, finished, claimed, or was
        // dispatched again: it is dropped without being published.
        let due = sqlx::query_as::<_, OutboxRow>(concat!(
            "SELECT o.id, o.tenant_id, o.task_id, o.generation, o.tool,",
            " (t.task_id IS NULL OR t.status NOT IN ('working', 'input_required')",
            "  OR t.dispatch_generation <> o.generation OR t.lease_token IS NOT NULL",
            "  OR NOT ",
            live!(),
            ") AS stale, t.trace_context",
            " FROM dispatch_outbox o LEFT JOIN tasks t",
            "   ON t.tenant_id = o.tenant_id AND t.task_id = o.task_id",
            " WHERE o.available_at <= now()",
            " ORDER BY o.available_at, o.id LIMIT $1 FOR UPDATE OF o SKIP LOCKED"
        ))
        .bind(i64::from(limit))
        .fetch_all(&mut *tx)
        .await
        .map_err(store_error)?;
        if due.is_empty() {
            // The common pass with nothing to do (a poll, or a wake-up whose
            // jobs another replica's poll took first): no delete, no commit.
            tx.rollback().await.map_err(store_error)?;
            return Ok(0);
        }

        let (stale, live): (Vec<&OutboxRow>, Vec<&OutboxRow>) =
            due.iter().partition(|job| job.stale);
        let mut done: Vec<i64> = stale.iter().map(|job| job.id).collect();
        let messages: Vec<JobMessage> = live
            .iter()
            .map(|job| JobMessage {
                tenant_id: job.tenant_id.clone(),
                task_id: job.task_id.clone(),
                generation: u64::try_from(job.generation).unwrap_or(0),
                tool: job.tool.clone(),
                trace_context: job.trace_context.clone(),
            })
            .collect();
        // The whole batch is in flight at once; each job's outcome is
        // handled on its own (a confirmed job is deleted even when another
        // one failed).
        let outcomes = publisher.publish_all(&messages).await;
        let mut published = 0;
        let mut failure = None;
        for (job, outcome) in live.into_iter().zip(outcomes) {
            match outcome {
                Ok(Published::Queued) => {
                    done.push(job.id);
                    published += 1;
                }
                Ok(Published::NoWorkerForTool) => self.hold_for_worker(&mut tx, job).await?,
                Err(err) => {
                    failure.get_or_insert(err);
                }
            }
        }
        sqlx::query("DELETE FROM dispatch_outbox WHERE id = ANY($1)")
            .bind(&done)
            .execute(&mut *tx)
            .await
            .map_err(store_error)?;
        tx.commit().await.map_err(store_error)?;
        match failure {
            Some(err) => Err(StoreError::Unavailable(err.to_string())),
            None => Ok(published),
        }
    }

    fn outbox_signal(&self) -> Arc<Notify> {
        self.outbox.clone()
    }
}

impl PgTaskStore {
    /// No worker serves the job's tool yet: offer it again later, and say so
    /// in the task's status message.
    async fn hold_for_worker(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        job: &OutboxRow,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE dispatch_outbox SET available_at = now() + $2 * interval '1 millisecond' WHERE id = $1")
            .bind(job.id)
            .bind(millis(self.config.execution.unroutable_retry))
            .execute(&mut **tx)
            .await
            .map_err(store_error)?;
        let note = waiting_for_worker_message(&job.tool);
        let noted = sqlx::query(
            "UPDATE tasks SET status_message = $3,
                    last_updated_at = GREATEST(now(), last_updated_at + interval '1 microsecond')
             WHERE tenant_id = $1 AND task_id = $2 AND status_message IS DISTINCT FROM $3",
        )
        .bind(&job.tenant_id)
        .bind(&job.task_id)
        .bind(&note)
        .execute(&mut **tx)
        .await
        .map_err(store_error)?
        .rows_affected();
        if noted > 0 {
            log_held_for_worker(&job.task_id, &job.tool);
        }
        Ok(())
    }
}
