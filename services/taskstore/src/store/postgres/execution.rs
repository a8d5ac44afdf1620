//! The execution protocol on PostgreSQL: claims, leases, releases, the lease
//! reaper and the outbox relay. Each step is one statement or one short
//! transaction, arbitrated by row locks, so any number of replicas and
//! workers can race without a task running twice under a live lease.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::{Postgres, Transaction};
use taskstore_proto::jobs::JobMessage;
use tokio::sync::Notify;

use super::error::store_error;
use super::rows::stored_json;
use super::{PgTaskStore, already_terminal};
use crate::domain::{
    Claim, LeaseToken, ReleaseOutcome, ReleaseReason, Renewal, TaskId, TaskStatus, TenantId,
    ToolName,
};
use crate::error::StoreError;
use crate::store::execution::messages::{self, error_result, lease_lost};
use crate::store::execution::{ExecutionStore, JobPublisher, Published};

/// Most expired leases handled per reaper transaction.
const REAP_BATCH: i64 = 100;

#[derive(sqlx::FromRow)]
struct ClaimedRow {
    attempt: i32,
    max_attempts: i32,
    tool: String,
    request_json: String,
}

#[derive(sqlx::FromRow)]
struct HeldRow {
    attempt: i32,
    max_attempts: i32,
    lease_owner: Option<String>,
}

#[derive(sqlx::FromRow)]
struct StateRow {
    status: String,
    generation: i64,
    claimed: bool,
    ours: bool,
    dispatched: bool,
}

#[derive(sqlx::FromRow)]
struct ExpiredRow {
    tenant_id: String,
    task_id: String,
    attempt: i32,
    max_attempts: i32,
    lease_owner: Option<String>,
}

#[derive(sqlx::FromRow)]
struct OutboxRow {
    id: i64,
    tenant_id: String,
    task_id: String,
    generation: i64,
    tool: String,
    stale: bool,
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

fn to_u32(value: i32) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

impl PgTaskStore {
    /// The task's state, as seen by a refused claim, renewal or release.
    async fn state(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: Option<&LeaseToken>,
    ) -> Result<Option<StateRow>, StoreError> {
        sqlx::query_as::<_, StateRow>(concat!(
            "SELECT status, dispatch_generation AS generation, lease_token IS NOT NULL AS claimed,",
            " COALESCE(lease_token = $3, false) AS ours, tool IS NOT NULL AS dispatched",
            " FROM tasks WHERE tenant_id = $1 AND task_id = $2 AND ",
            live!()
        ))
        .bind(tenant.as_str())
        .bind(task_id.as_str())
        .bind(lease.map(LeaseToken::as_str))
        .fetch_optional(self.pool())
        .await
        .map_err(store_error)
    }

    /// Dispatches a held task again: a new generation, a new outbox job due
    /// after `delay`, the lease cleared. `attempt_delta` -1 gives the attempt
    /// back (shutdown).
    async fn requeue(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        tenant: &str,
        task_id: &str,
        attempt_delta: i32,
        delay: Duration,
        message: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "WITH task AS (
                 UPDATE tasks SET lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL,
                        attempt = GREATEST(attempt + $3, 0),
                        dispatch_generation = dispatch_generation + 1,
                        status_message = $4,
                        last_updated_at = GREATEST(now(), last_updated_at + interval '1 microsecond')
                 WHERE tenant_id = $1 AND task_id = $2
                 RETURNING tenant_id, task_id, dispatch_generation, tool)
             INSERT INTO dispatch_outbox (tenant_id, task_id, generation, tool, available_at)
             SELECT tenant_id, task_id, dispatch_generation, tool,
                    now() + $5 * interval '1 millisecond'
             FROM task",
        )
        .bind(tenant)
        .bind(task_id)
        .bind(attempt_delta)
        .bind(message)
        .bind(millis(delay))
        .execute(&mut **tx)
        .await
        .map_err(store_error)?;
        Ok(())
    }

    /// Ends a held task as FAILED with an error result: out of attempts.
    async fn give_up(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        tenant: &str,
        task_id: &str,
        message: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE tasks SET status = 'failed', status_message = $3, result_json = $4,
                    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL,
                    last_updated_at = GREATEST(now(), last_updated_at + interval '1 microsecond'),
                    expires_at = GREATEST(expires_at, now() + ttl_ms * interval '1 millisecond')
             WHERE tenant_id = $1 AND task_id = $2",
        )
        .bind(tenant)
        .bind(task_id)
        .bind(message)
        .bind(error_result(message))
        .execute(&mut **tx)
        .await
        .map_err(store_error)?;
        Ok(())
    }

    async fn reap_batch(&self) -> Result<u64, StoreError> {
        let mut tx = self.pool().begin().await.map_err(store_error)?;
        let expired = sqlx::query_as::<_, ExpiredRow>(concat!(
            "SELECT tenant_id, task_id, attempt, max_attempts, lease_owner FROM tasks",
            " WHERE lease_expires_at < now() AND status IN ('working', 'input_required') AND ",
            live!(),
            " ORDER BY lease_expires_at LIMIT $1 FOR UPDATE SKIP LOCKED"
        ))
        .bind(REAP_BATCH)
        .fetch_all(&mut *tx)
        .await
        .map_err(store_error)?;
        for lost in &expired {
            let owner = lost.lease_owner.as_deref().unwrap_or("a worker");
            if lost.attempt >= lost.max_attempts {
                let message = messages::lease_expired_failed(owner, lost.max_attempts.into());
                tracing::warn!(task_id = %lost.task_id, attempts = lost.attempt, "lease expired on the last attempt; task failed");
                self.give_up(&mut tx, &lost.tenant_id, &lost.task_id, &message)
                    .await?;
            } else {
                let message = messages::lease_expired_retry(
                    owner,
                    lost.attempt.into(),
                    lost.max_attempts.into(),
                );
                tracing::warn!(task_id = %lost.task_id, attempt = lost.attempt, "lease expired; dispatching again");
                self.requeue(
                    &mut tx,
                    &lost.tenant_id,
                    &lost.task_id,
                    0,
                    Duration::ZERO,
                    &message,
                )
                .await?;
            }
        }
        tx.commit().await.map_err(store_error)?;
        Ok(expired.len() as u64)
    }
}

#[async_trait]
impl ExecutionStore for PgTaskStore {
    async fn claim(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        generation: u64,
        worker: &str,
    ) -> Result<Claim, StoreError> {
        let lease_token = crate::store::new_lease_token()?;
        let lease_duration = self.config.execution.lease_duration;
        let generation = i64::try_from(generation)
            .map_err(|_| StoreError::invalid("generation", "is out of range"))?;
        let claimed = sqlx::query_as::<_, ClaimedRow>(concat!(
            "UPDATE tasks SET attempt = attempt + 1, lease_token = $4, lease_owner = $5,",
            " lease_expires_at = now() + $6 * interval '1 millisecond',",
            " status_message = 'running on ' || $5 || ' (attempt ' || (attempt + 1) || ' of ' || max_attempts || ')',",
            " last_updated_at = GREATEST(now(), last_updated_at + interval '1 microsecond')",
            " WHERE tenant_id = $1 AND task_id = $2 AND dispatch_generation = $3",
            " AND status IN ('working', 'input_required') AND tool IS NOT NULL AND lease_token IS NULL AND ",
            live!(),
            " RETURNING attempt, max_attempts, tool, request_json"
        ))
        .bind(tenant.as_str())
        .bind(task_id.as_str())
        .bind(generation)
        .bind(lease_token.as_str())
        .bind(worker)
        .bind(millis(lease_duration))
        .fetch_optional(self.pool())
        .await
        .map_err(store_error)?;

        if let Some(row) = claimed {
            return Ok(Claim {
                lease_token,
                lease_duration,
                attempt: to_u32(row.attempt),
                max_attempts: to_u32(row.max_attempts),
                tool: ToolName::parse(&row.tool)
                    .map_err(|_| StoreError::Internal("corrupt task row".into()))?,
                request: stored_json(row.request_json)?,
            });
        }
        let state = self
            .state(tenant, task_id, None)
            .await?
            .ok_or(StoreError::NotFound)?;
        let status: TaskStatus = state
            .status
            .parse()
            .map_err(|_| StoreError::Internal("corrupt task row".into()))?;
        Err(messages::claim_refused(
            status,
            state.dispatched,
            state.generation == generation,
            state.claimed,
        ))
    }

    async fn renew(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
    ) -> Result<Renewal, StoreError> {
        let renewed = sqlx::query(concat!(
            "UPDATE tasks SET lease_expires_at = now() + $4 * interval '1 millisecond'",
            " WHERE tenant_id = $1 AND task_id = $2 AND lease_token = $3",
            " AND status IN ('working', 'input_required') AND ",
            live!()
        ))
        .bind(tenant.as_str())
        .bind(task_id.as_str())
        .bind(lease.as_str())
        .bind(millis(self.config.execution.lease_duration))
        .execute(self.pool())
        .await
        .map_err(store_error)?
        .rows_affected();
        if renewed == 1 {
            return Ok(Renewal::KeepRunning);
        }
        let state = self.state(tenant, task_id, Some(lease)).await?;
        let status = state
            .as_ref()
            .map(|s| s.status.parse::<TaskStatus>())
            .transpose();
        let status = status.map_err(|_| StoreError::Internal("corrupt task row".into()))?;
        let ours = state.is_some_and(|s| s.ours);
        Ok(Renewal::Stop(messages::stop_reason(status, ours)))
    }

    async fn release(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
        reason: ReleaseReason,
        message: &str,
    ) -> Result<ReleaseOutcome, StoreError> {
        let mut tx = self.pool().begin().await.map_err(store_error)?;
        let held = sqlx::query_as::<_, HeldRow>(concat!(
            "SELECT attempt, max_attempts, lease_owner FROM tasks",
            " WHERE tenant_id = $1 AND task_id = $2 AND lease_token = $3",
            " AND status IN ('working', 'input_required') AND ",
            live!(),
            " FOR UPDATE"
        ))
        .bind(tenant.as_str())
        .bind(task_id.as_str())
        .bind(lease.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(store_error)?;
        let Some(held) = held else {
            drop(tx);
            return Err(match self.state(tenant, task_id, Some(lease)).await? {
                None => StoreError::NotFound,
                Some(state) => match state.status.parse::<TaskStatus>() {
                    Ok(status) if status.is_terminal() => already_terminal(status),
                    _ => lease_lost(),
                },
            });
        };
        let policy = &self.config.execution;
        let owner = held.lease_owner.as_deref().unwrap_or("a worker");
        let outcome = match reason {
            ReleaseReason::Shutdown => {
                let note = messages::requeued_on_shutdown(owner);
                self.requeue(
                    &mut tx,
                    tenant.as_str(),
                    task_id.as_str(),
                    -1,
                    Duration::ZERO,
                    &note,
                )
                .await?;
                ReleaseOutcome::Retry {
                    after: Duration::ZERO,
                }
            }
            ReleaseReason::RetryableError if held.attempt < held.max_attempts => {
                let after = policy.backoff(
                    to_u32(held.attempt),
                    crate::domain::ExecutionPolicy::jitter(),
                );
                let note = messages::retrying(
                    held.attempt.into(),
                    held.max_attempts.into(),
                    message,
                    after,
                );
                self.requeue(&mut tx, tenant.as_str(), task_id.as_str(), 0, after, &note)
                    .await?;
                ReleaseOutcome::Retry { after }
            }
            ReleaseReason::RetryableError => {
                let note = messages::failed_after(held.max_attempts.into(), message);
                self.give_up(&mut tx, tenant.as_str(), task_id.as_str(), &note)
                    .await?;
                ReleaseOutcome::Failed
            }
        };
        tx.commit().await.map_err(store_error)?;
        self.outbox.notify_one();
        Ok(outcome)
    }

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
            ") AS stale",
            " FROM dispatch_outbox o LEFT JOIN tasks t",
            "   ON t.tenant_id = o.tenant_id AND t.task_id = o.task_id",
            " WHERE o.available_at <= now()",
            " ORDER BY o.available_at, o.id LIMIT $1 FOR UPDATE OF o SKIP LOCKED"
        ))
        .bind(i64::from(limit))
        .fetch_all(&mut *tx)
        .await
        .map_err(store_error)?;

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
        let note = messages::waiting_for_worker(&job.tool);
        sqlx::query(
            "UPDATE tasks SET status_message = $3,
                    last_updated_at = GREATEST(now(), last_updated_at + interval '1 microsecond')
             WHERE tenant_id = $1 AND task_id = $2 AND status_message IS DISTINCT FROM $3",
        )
        .bind(&job.tenant_id)
        .bind(&job.task_id)
        .bind(&note)
        .execute(&mut **tx)
        .await
        .map_err(store_error)?;
        Ok(())
    }
}
