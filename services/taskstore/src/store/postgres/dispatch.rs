//! The service's side of the execution protocol on PostgreSQL: the lease
//! reaper and the outbox relay (this replica's fresh jobs are `handoff`'s).
//! Both take their rows with `FOR UPDATE SKIP LOCKED`, so replicas running
//! them at once share the work without touching a row twice.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use tokio::sync::Notify;

use super::PgTaskStore;
use super::apply::apply;
use super::error::store_error;
use super::execution::{HeldRow, held_columns};
use super::handoff::{FreshJob, HANDOFF_GRACE};
use super::rows::millis;
use crate::domain::{AttemptEnd, Effects, NextStep};
use crate::error::StoreError;
use crate::store::execution::{DispatchStore, DueJob, log_held_for_worker};
use crate::store::statements::sql;

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
        let mut tx = self.begin().await?;
        let expired = sqlx::query_as::<_, HeldRow>(sql!(concat!(
            "SELECT ",
            held_columns!(),
            " FROM tasks",
            // `max_attempts IS NOT NULL` and the statuses match the partial
            // index of open dispatched tasks (migration 0007): the lease's
            // expiry is deliberately not indexed, so claims stay HOT updates.
            " WHERE ",
            dispatched_open!(),
            " AND lease_expires_at < now() AND ",
            live!(),
            " ORDER BY lease_expires_at LIMIT $1 FOR UPDATE SKIP LOCKED"
        )))
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
        super::commit(tx).await?;
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

    async fn take_due_jobs(&self, limit: u32) -> Result<Vec<DueJob>, StoreError> {
        // This replica's own jobs first, from memory (`handoff`); then the
        // outbox's due jobs: other replicas', retries, and any whose direct
        // publish failed.
        let mut jobs = self.take_fresh(limit);
        if !self.poll_due(!jobs.is_empty()) {
            return Ok(jobs);
        }
        match self.take_outbox(limit).await {
            Ok(due) => jobs.extend(due),
            // The fresh jobs go out anyway; their rows are the guarantee.
            Err(err) if !jobs.is_empty() => {
                tracing::debug!(error = %err, "the outbox could not be read; publishing this replica's own jobs");
            }
            Err(err) => return Err(err),
        }
        Ok(jobs)
    }

    async fn forget_jobs(&self, queued: &[i64]) -> Result<(), StoreError> {
        for &id in queued {
            // The rows are deleted in the background (`handoff`). A closed
            // channel means the store is going away; a row then falls due
            // and is checked again.
            let _ = self.forget.send(id);
        }
        Ok(())
    }

    async fn hold_for_worker(&self, job: &DueJob) -> Result<(), StoreError> {
        let (tenant, task_id) = (&job.message.tenant_id, &job.message.task_id);
        let mut tx = self.begin().await?;
        // The job is offered again later; the task's message is read
        // (and the row locked) in the same statement.
        let message: Option<Option<String>> = sqlx::query_scalar(sql!(
            "WITH later AS (
                 UPDATE dispatch_outbox SET available_at = now() + $4 * interval '1 millisecond'
                 WHERE id = $3)
             SELECT status_message FROM tasks WHERE tenant_id = $1 AND task_id = $2 FOR UPDATE"
        ))
        .bind(tenant)
        .bind(task_id)
        .bind(job.outbox_id)
        .bind(millis(self.config.execution.unroutable_retry))
        .fetch_optional(&mut *tx)
        .await
        .map_err(store_error)?;
        let effects = message
            .map(|message| Effects::of_waiting_for_worker(message.as_deref(), &job.message.tool))
            .unwrap_or_default();
        apply(&mut tx, tenant, task_id, &effects).await?;
        super::commit(tx).await?;
        if !effects.is_none() {
            log_held_for_worker(task_id, &job.message.tool);
        }
        Ok(())
    }

    /// Their rows fall due now: the relay's next poll retries them (and
    /// drops any that went stale).
    async fn leave_to_outbox(&self, outbox_ids: &[i64]) {
        let due = sqlx::query(sql!(
            "UPDATE dispatch_outbox SET available_at = now() WHERE id = ANY($1)"
        ))
        .persistent(false) // planned for its array: batch_writer.rs, "Plans"
        .bind(outbox_ids)
        .execute(self.pool())
        .await;
        if let Err(err) = due {
            tracing::debug!(error = %store_error(err), jobs = outbox_ids.len(), "unpublished jobs fall due at the end of their grace");
        }
    }

    fn outbox_signal(&self) -> Arc<Notify> {
        self.outbox.clone()
    }
}

impl PgTaskStore {
    /// Takes up to `limit` due jobs from the outbox, in one statement that
    /// pushes their rows' due time past the grace (so that no other relay
    /// takes them meanwhile) and commits: no transaction stays open across
    /// the publish. Stale jobs' rows are deleted like published ones.
    async fn take_outbox(&self, limit: u32) -> Result<Vec<DueJob>, StoreError> {
        // A job is stale when its task is gone, finished, claimed, or was
        // dispatched again: it is dropped without being published.
        let due = sqlx::query_as::<_, OutboxRow>(sql!(concat!(
            "WITH taken AS (",
            " UPDATE dispatch_outbox o SET available_at = now() + $2 * interval '1 millisecond'",
            " FROM (SELECT id FROM dispatch_outbox WHERE available_at <= now()",
            "       ORDER BY available_at, id LIMIT $1 FOR UPDATE SKIP LOCKED) due",
            " WHERE o.id = due.id",
            " RETURNING o.id, o.tenant_id, o.task_id, o.generation, o.tool)",
            " SELECT o.id, o.tenant_id, o.task_id, o.generation, o.tool,",
            " (t.task_id IS NULL OR t.dispatch_generation <> o.generation OR NOT (",
            claimable!("t."),
            ")) AS stale, t.trace_context",
            " FROM taken o LEFT JOIN tasks t",
            "   ON t.tenant_id = o.tenant_id AND t.task_id = o.task_id"
        )))
        .bind(i64::from(limit))
        .bind(millis(HANDOFF_GRACE))
        .fetch_all(self.pool())
        .await
        .map_err(store_error)?;

        let (stale, live): (Vec<OutboxRow>, Vec<OutboxRow>) =
            due.into_iter().partition(|job| job.stale);
        for job in &stale {
            // A closed channel means the store is going away; the row then
            // falls due again and is dropped then.
            let _ = self.forget.send(job.id);
        }
        Ok(live
            .into_iter()
            .map(|job| {
                FreshJob::of_row(
                    job.id,
                    job.tenant_id,
                    job.task_id,
                    job.generation,
                    job.tool,
                    job.trace_context,
                    Instant::now(),
                )
                .into_due()
            })
            .collect())
    }
}
