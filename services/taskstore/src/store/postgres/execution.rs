//! The worker-facing execution protocol on PostgreSQL: claims, renewals and
//! releases. Each is one statement or one short transaction arbitrated by
//! row locks, so any number of replicas and workers can race without a task
//! running twice under a live lease. What a release means is decided in
//! `domain::execution` ([`after_attempt`]); this file applies it.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Postgres, Transaction};

use super::PgTaskStore;
use super::claim_batch::ClaimRequest;
use super::error::store_error;
use super::questions::{LockedTask, questions_of};
use super::rows::{millis, stored_json};
use crate::domain::Question;
use crate::domain::questions::{self, AskStep, open_requests, waiting_effects};
use crate::domain::{
    AttemptEnd, AttemptState, Claim, ClaimRefusal, Claimant, Effects, ExecutionPolicy, InputKey,
    InputRequest, JsonObject, LeaseToken, NextStep, ReleaseOutcome, ReleaseReason, Renewal,
    RetryPolicy, SessionRenewal, StopReason, TaskId, TaskStatus, TenantId, ToolName, WorkerSession,
    after_attempt,
};
use crate::error::StoreError;
use crate::store::execution::ExecutionStore;
use crate::store::statements::sql;

/// A claimed task, locked for the end of its attempt.
#[derive(sqlx::FromRow)]
pub(super) struct HeldRow {
    pub(super) tenant_id: String,
    pub(super) task_id: String,
    pub(super) status: String,
    pub(super) attempt: i32,
    pub(super) max_attempts: i32,
    pub(super) lease_owner: Option<String>,
    /// Its questions still waiting for an answer.
    pub(super) open_questions: i64,
    /// Its tool's retry policy (`RetryPolicy::to_stored`).
    pub(super) retry_policy: Option<String>,
}

/// The columns of a [`HeldRow`], read from `tasks`.
macro_rules! held_columns {
    () => {
        concat!(
            "tenant_id, task_id, status, attempt, max_attempts, lease_owner, retry_policy,",
            " (SELECT count(*) FROM task_input_requests q WHERE q.tenant_id = tasks.tenant_id",
            "  AND q.task_id = tasks.task_id AND q.answer_json IS NULL) AS open_questions"
        )
    };
}
pub(super) use held_columns;

#[derive(sqlx::FromRow)]
struct StateRow {
    status: String,
    generation: i64,
    claimed: bool,
    ours: bool,
    dispatched: bool,
}

fn to_u32(value: i32) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

fn corrupt() -> StoreError {
    StoreError::Internal("corrupt task row".into())
}

impl PgTaskStore {
    /// The task's state, as seen by a refused claim, renewal or release.
    async fn state(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: Option<&LeaseToken>,
    ) -> Result<Option<StateRow>, StoreError> {
        sqlx::query_as::<_, StateRow>(sql!(concat!(
            "SELECT status, dispatch_generation AS generation, lease_token IS NOT NULL AS claimed,",
            " COALESCE(lease_token = $3, false) AS ours, max_attempts IS NOT NULL AS dispatched",
            " FROM tasks WHERE ",
            live_task!()
        )))
        .bind(tenant.as_str())
        .bind(task_id.as_str())
        .bind(lease.map(LeaseToken::as_str))
        .fetch_optional(self.pool())
        .await
        .map_err(store_error)
    }

    /// The task's status (`None`: gone) and whether `lease` is its
    /// current one: what decides whether an attempt under it goes on.
    async fn attempt_state(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
    ) -> Result<(Option<TaskStatus>, bool), StoreError> {
        let state = self.state(tenant, task_id, Some(lease)).await?;
        let status = state
            .as_ref()
            .map(|s| s.status.parse::<TaskStatus>())
            .transpose()
            .map_err(|_| corrupt())?;
        Ok((status, state.is_some_and(|s| s.ours)))
    }

    /// Ends the attempt of a held (locked) task as the domain decides, in
    /// the caller's transaction: dispatched again (a new generation and its
    /// job, the lease cleared) or FAILED with an error result.
    pub(super) async fn end_attempt(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        held: &HeldRow,
        end: &AttemptEnd,
    ) -> Result<NextStep, StoreError> {
        let state = AttemptState {
            status: held.status.parse().map_err(|_| corrupt())?,
            attempt: to_u32(held.attempt),
            max_attempts: to_u32(held.max_attempts),
            owner: held
                .lease_owner
                .clone()
                .unwrap_or_else(|| "a worker".to_owned()),
            open_questions: usize::try_from(held.open_questions).unwrap_or(usize::MAX),
            retry: RetryPolicy::of_stored(held.retry_policy.as_deref()),
        };
        let policy = &self.config.execution;
        let next = after_attempt(&state, end, policy, ExecutionPolicy::jitter());
        let effects = Effects::of_attempt_end(&next, end);
        super::apply::apply(tx, &held.tenant_id, &held.task_id, &effects).await?;
        crate::metrics::attempt_ended(end, &next);
        Ok(next)
    }
}

#[async_trait]
impl ExecutionStore for PgTaskStore {
    async fn claim_as(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        generation: u64,
        claimant: &Claimant,
    ) -> Result<Claim, StoreError> {
        let lease_token = crate::store::new_lease_token()?;
        let lease_duration = self.config.execution.lease_duration;
        let generation = i64::try_from(generation)
            .map_err(|_| StoreError::invalid("generation", "is out of range"))?;
        // The claim is decided in a batch with the others waiting now
        // (`claim_batch`): one statement, one commit for all of them.
        let request = ClaimRequest {
            tenant: tenant.as_str().to_owned(),
            task_id: task_id.as_str().to_owned(),
            generation,
            lease_token: lease_token.as_str().to_owned(),
            worker: claimant.worker.clone(),
            session: claimant.session.as_ref().map(|s| s.as_str().to_owned()),
        };
        let claimed = super::batch_writer::submit(&self.claims, request).await?;
        // A worker took a job from its queue: while a tool's backlog waits
        // here, that is room for the next one.
        if self.gate.any_backlog() {
            self.outbox.notify_one();
        }

        if let Some(row) = claimed {
            return Ok(Claim {
                lease_token,
                lease_duration,
                attempt: to_u32(row.attempt),
                max_attempts: to_u32(row.max_attempts),
                tool: ToolName::parse(&row.tool).map_err(|_| corrupt())?,
                request: stored_json(row.request_json)?,
                waited: Some(Duration::from_secs_f64(row.waited_ms.max(0.0) / 1000.0)),
                in_session: row.in_session,
            });
        }
        let state = self
            .state(tenant, task_id, None)
            .await?
            .ok_or(StoreError::NotFound)?;
        let status: TaskStatus = state.status.parse().map_err(|_| corrupt())?;
        Err(ClaimRefusal::explain(
            status,
            state.dispatched,
            state.generation == generation,
            state.claimed,
        )
        .into())
    }

    async fn renew(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
    ) -> Result<Renewal, StoreError> {
        let renewed = sqlx::query(sql!(concat!(
            "UPDATE tasks SET lease_expires_at = now() + $4 * interval '1 millisecond'",
            " WHERE tenant_id = $1 AND task_id = $2 AND ",
            held_under!("$3")
        )))
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
        let (status, ours) = self.attempt_state(tenant, task_id, lease).await?;
        Ok(Renewal::Stop(StopReason::for_task(status, ours)))
    }

    async fn check(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
    ) -> Result<Renewal, StoreError> {
        let (status, ours) = self.attempt_state(tenant, task_id, lease).await?;
        Ok(Renewal::of_attempt(status, ours))
    }

    async fn renew_session(
        &self,
        worker: &str,
        session: &WorkerSession,
        open: bool,
    ) -> Result<SessionRenewal, StoreError> {
        self.renew_worker_session(worker, session, open).await
    }

    async fn release(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
        reason: ReleaseReason,
        message: &str,
    ) -> Result<ReleaseOutcome, StoreError> {
        let scope = crate::domain::Scope {
            tenant: tenant.clone(),
            session: None,
        };
        self.write_waiting_progress(&scope, task_id).await;
        let (mut tx, held) = self
            .lock_held::<HeldRow>(
                sql!(lock_held_task!(held_columns!())),
                tenant,
                task_id,
                lease,
            )
            .await?;
        let end = AttemptEnd::of_release(reason, message);
        let next = self.end_attempt(&mut tx, &held, &end).await?;
        if let ReleaseReason::BackOff { wait } = reason {
            pause_key_of(&mut tx, &held, wait).await?;
        }
        super::commit(tx).await?;
        self.outbox.notify_one();
        // The row was locked in a live status, so something was decided.
        next.outcome()
            .ok_or_else(|| StoreError::Internal("a held task was already terminal".into()))
    }

    async fn ask(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
        key: &InputKey,
        request: &InputRequest,
    ) -> Result<Option<JsonObject>, StoreError> {
        let (mut tx, locked) = self
            .lock_held::<LockedTask>(
                sql!(lock_held_task!(
                    "status, status_message, parked_at IS NOT NULL AS parked"
                )),
                tenant,
                task_id,
                lease,
            )
            .await?;
        let mut questions = questions_of(&mut tx, tenant.as_str(), task_id.as_str()).await?;
        let existing = questions.iter().find(|q| &q.key == key);
        match questions::ask(existing, request, questions.len())? {
            AskStep::Answered(answer) => return Ok(Some(answer)),
            AskStep::Waiting => {}
            AskStep::Ask => {
                let asked_at: DateTime<Utc> = sqlx::query_scalar(sql!(
                    "INSERT INTO task_input_requests
                         (tenant_id, task_id, request_key, request_json, asked_at)
                     VALUES ($1, $2, $3, $4, now()) RETURNING asked_at"
                ))
                .bind(tenant.as_str())
                .bind(task_id.as_str())
                .bind(key.as_str())
                .bind(request.as_json().as_str())
                .fetch_one(&mut *tx)
                .await
                .map_err(store_error)?;
                questions.push(Question {
                    key: key.clone(),
                    request: request.clone(),
                    asked_at,
                    answer: None,
                });
            }
        }
        let status = locked.status()?;
        let effects = waiting_effects(
            &open_requests(&questions),
            status,
            locked.status_message.as_deref(),
        );
        super::apply::apply(&mut tx, tenant.as_str(), task_id.as_str(), &effects).await?;
        super::commit(tx).await?;
        Ok(None)
    }
}

/// Pauses the key of `held`'s task (`domain::pause_key`, written here in
/// SQL) for `wait`, in the release's transaction; a later pause of the key
/// wins over an earlier one, never the other way.
async fn pause_key_of(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    held: &HeldRow,
    wait: std::time::Duration,
) -> Result<(), StoreError> {
    sqlx::query(sql!(
        "INSERT INTO dispatch_pauses (tool, pause_key, until)
         SELECT tool, COALESCE(rate_key, limit_key, ''), now() + $3 * interval '1 millisecond'
         FROM tasks WHERE tenant_id = $1 AND task_id = $2 AND tool IS NOT NULL
         ON CONFLICT (tool, pause_key)
         DO UPDATE SET until = GREATEST(dispatch_pauses.until, EXCLUDED.until)"
    ))
    .bind(&held.tenant_id)
    .bind(&held.task_id)
    .bind(millis(wait))
    .execute(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(())
}
