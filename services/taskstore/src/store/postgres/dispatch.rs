//! The service's side of the execution protocol on PostgreSQL: the lease
//! reaper and the outbox relay (this replica's fresh jobs are `handoff`'s).
//! Both take their rows with `FOR UPDATE SKIP LOCKED`, so replicas running
//! them at once share the work without touching a row twice.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Notify;

use super::PgTaskStore;
use super::apply::apply;
use super::error::store_error;
use super::execution::{HeldRow, held_columns};
use super::rows::millis;
use crate::domain::{AttemptEnd, Effects, NextStep};
use crate::error::StoreError;
use crate::store::execution::{DispatchStore, DueJob, JobPublisher, log_held_for_worker};
use crate::store::statements::sql;

/// Most expired leases handled per reaper transaction.
const REAP_BATCH: i64 = 100;

/// The attempts renewed one by one whose lease expired, through the index
/// of those leases (migration 0025).
const TASK_LEASES_OVER: &str = sql!(concat!(
    "SELECT ",
    held_columns!(),
    " FROM tasks WHERE lease_session IS NULL AND lease_expires_at IS NOT NULL AND ",
    dispatched_open!(),
    " AND lease_expires_at < now() AND ",
    live!(),
    " ORDER BY lease_expires_at LIMIT $1 FOR UPDATE SKIP LOCKED"
));

/// The attempts of the expired sessions `$2` whose own (first) lease
/// expired too, through the index of session leases (migration 0025). A
/// claim records only a live session, and an expired one's row stays an
/// hour (`sessions.rs`), so no running attempt's session is missing.
const SESSION_LEASES_OVER: &str = sql!(concat!(
    "SELECT ",
    held_columns!(),
    " FROM tasks WHERE lease_session = ANY($2) AND ",
    dispatched_open!(),
    " AND lease_expires_at < now() AND ",
    live!(),
    " ORDER BY lease_expires_at LIMIT $1 FOR UPDATE SKIP LOCKED"
));

impl PgTaskStore {
    /// Dispatches again (or fails) a batch of the attempts `sql` finds dead
    /// (of the expired `sessions`, when it names them); how many.
    async fn reap_batch(
        &self,
        sql: &'static str,
        sessions: Option<&[String]>,
    ) -> Result<u64, StoreError> {
        let mut tx = self.begin().await?;
        let mut query = sqlx::query_as::<_, HeldRow>(sql).bind(REAP_BATCH);
        if let Some(sessions) = sessions {
            query = query.bind(sessions);
        }
        let expired = query.fetch_all(&mut *tx).await.map_err(store_error)?;
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

    /// Every batch `sql` finds; how many attempts in all.
    async fn reap_all(
        &self,
        sql: &'static str,
        sessions: Option<&[String]>,
    ) -> Result<u64, StoreError> {
        let mut total = 0;
        loop {
            let reaped = self.reap_batch(sql, sessions).await?;
            total += reaped;
            if reaped < REAP_BATCH as u64 {
                return Ok(total);
            }
        }
    }
}

#[async_trait]
impl DispatchStore for PgTaskStore {
    async fn reap_expired_leases(&self) -> Result<u64, StoreError> {
        let mut total = self.reap_all(TASK_LEASES_OVER, None).await?;
        // The expired sessions first, then their attempts by session: the
        // planner cannot start from the attempts and read them all (a
        // worker's session holds thousands), and with no expired session
        // (the usual case) no attempt is read at all.
        let over = self.expired_sessions().await?;
        if !over.is_empty() {
            total += self.reap_all(SESSION_LEASES_OVER, Some(&over)).await?;
        }
        self.forget_expired_sessions().await?;
        if total > 0 {
            self.outbox.notify_one();
        }
        Ok(total)
    }

    async fn take_due_jobs(
        &self,
        limit: u32,
        queue: &dyn JobPublisher,
    ) -> Result<Vec<DueJob>, StoreError> {
        // This replica's own jobs first, from memory (`handoff`), straight
        // out while their tool's queue has room and no backlog waits; the
        // others wait in the outbox with the rest of the backlog (other
        // replicas' jobs, retries, later starts, failed publishes), where
        // `governed` decides what goes next.
        let mut jobs = Vec::new();
        let mut held = Vec::new();
        for (tool, mut fresh) in by_tool(self.take_fresh(limit)) {
            let count = u32::try_from(fresh.len()).unwrap_or(u32::MAX);
            let admitted = self.gate.admit_fresh(&tool, count, queue).await as usize;
            let rest = fresh.split_off(admitted.min(fresh.len()));
            jobs.extend(fresh);
            held.extend(rest.iter().map(|job| job.outbox_id));
        }
        if !held.is_empty() {
            // A failure leaves them to their grace: they fall due then.
            if let Err(err) = self.make_ready(&held).await {
                tracing::debug!(error = %err, jobs = held.len(), "jobs left to the outbox fall due at the end of their grace");
            }
        }
        if !self.poll_due(!jobs.is_empty()) && held.is_empty() && !self.gate.any_backlog() {
            return Ok(jobs);
        }
        match self.take_governed(limit, queue, &jobs).await {
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
            // The rows are marked published in the background (`handoff`),
            // and kept until their jobs are known claimed. A closed channel
            // means the store is going away; a row then falls due and is
            // checked again.
            let _ = self.forget.send(id);
        }
        Ok(())
    }

    async fn hold_for_worker(&self, job: &DueJob) -> Result<(), StoreError> {
        let (tenant, task_id) = (&job.message.tenant_id, &job.message.task_id);
        let mut tx = self.begin().await?;
        // The job is offered again later (giving back its key's slot until
        // then, unless a publish of it may still reach a worker); the
        // task's message is read
        // (and the row locked) in the same statement.
        let message: Option<Option<String>> = sqlx::query_scalar(sql!(
            "WITH later AS (
                 UPDATE dispatch_outbox SET ready = false,
                     available_at = now() + $4 * interval '1 millisecond'
                 WHERE id = $3 RETURNING tenant_id, task_id, generation, publishes),
             slot AS (DELETE FROM dispatch_slots s USING later
                 WHERE later.publishes = 0
                   AND s.tenant_id = later.tenant_id AND s.task_id = later.task_id
                   AND s.generation = later.generation)
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
    /// drops any that went stale); a limited one never published gives back
    /// its key's slot until then.
    async fn leave_to_outbox(&self, outbox_ids: &[i64]) {
        let due = sqlx::query(sql!(
            "WITH due AS (
                 UPDATE dispatch_outbox SET ready = true, available_at = now() WHERE id = ANY($1)
                 RETURNING tenant_id, task_id, generation, publishes)
             DELETE FROM dispatch_slots s USING due
             WHERE due.publishes = 0 AND s.tenant_id = due.tenant_id AND s.task_id = due.task_id
               AND s.generation = due.generation"
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

/// This pass's fresh jobs by tool, each tool's in the order they came.
fn by_tool(fresh: Vec<DueJob>) -> Vec<(String, Vec<DueJob>)> {
    let mut tools: Vec<(String, Vec<DueJob>)> = Vec::new();
    for job in fresh {
        match tools.iter_mut().find(|(tool, _)| *tool == job.message.tool) {
            Some((_, jobs)) => jobs.push(job),
            None => tools.push((job.message.tool.clone(), vec![job])),
        }
    }
    tools
}
