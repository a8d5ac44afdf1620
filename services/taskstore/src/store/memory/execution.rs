//! The worker-facing execution protocol in memory: the same claims, leases
//! and releases as PostgreSQL, with one lock instead of row locks, and the
//! same decisions (`domain::execution`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::MemoryTaskStore;
use super::state::{Key, State, delta, key};
use crate::domain::Question;
use crate::domain::questions::{self, AskStep, waiting_effects};
use crate::domain::{
    AttemptEnd, AttemptState, Claim, ClaimRefusal, Claimant, Effects, ExecutionPolicy, InputKey,
    InputRequest, JsonObject, LeaseGrant, LeaseToken, NextStep, ReleaseOutcome, ReleaseReason,
    Renewal, SessionRenewal, StopReason, TaskId, TenantId, WorkerSession, after_attempt,
};
use crate::error::StoreError;
use crate::store::execution::ExecutionStore;

impl MemoryTaskStore {
    /// Ends the attempt of the held task under `key` as the domain decides
    /// (the caller holds the lock and commits): dispatched again (a new
    /// generation and its job, the lease cleared) or FAILED with an error
    /// result.
    pub(super) fn end_attempt(
        &self,
        state: &mut State,
        key: &Key,
        end: &AttemptEnd,
        now: DateTime<Utc>,
    ) -> NextStep {
        let Some(record) = state.tasks.get(key) else {
            return NextStep::Unchanged;
        };
        let Some(dispatch) = record.dispatch.as_ref() else {
            return NextStep::Unchanged;
        };
        let attempt = AttemptState {
            status: record.task.status,
            attempt: dispatch.attempt,
            max_attempts: dispatch.max_attempts,
            owner: dispatch
                .lease
                .as_ref()
                .map_or_else(|| "a worker".to_owned(), |l| l.owner.clone()),
            open_questions: record.open_requests().len(),
            retry: dispatch.retry.clone(),
        };
        let policy = &self.config().execution;
        let next = after_attempt(&attempt, end, policy, ExecutionPolicy::jitter());
        super::apply::apply(state, key, &Effects::of_attempt_end(&next, end), now);
        crate::metrics::attempt_ended(end, &next);
        next
    }
}

#[async_trait]
impl ExecutionStore for MemoryTaskStore {
    async fn claim_as(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        generation: u64,
        claimant: &Claimant,
    ) -> Result<Claim, StoreError> {
        let token = crate::store::new_lease_token()?;
        let lease_duration = self.config().execution.lease_duration;
        let key = key(tenant.as_str(), task_id);
        let claim = {
            let mut state = self.lock().await;
            let now = state.now();
            let session = claimant.session.clone().filter(|session| {
                crate::domain::claim_binds_session(state.sessions.get(session).copied(), now)
            });
            let record = state
                .tasks
                .get_mut(&key)
                .filter(|r| r.is_live(now))
                .ok_or(StoreError::NotFound)?;
            let status = record.task.status;
            let dispatch = record
                .dispatch
                .as_ref()
                .map(|d| (d.generation == generation, d.lease.is_some()));
            let (current, claimed) = dispatch.unwrap_or((false, false));
            if let Some(refusal) = ClaimRefusal::check(status, dispatch.is_some(), current, claimed)
            {
                return Err(refusal.into());
            }
            let Some(dispatch) = record.dispatch.as_ref() else {
                return Err(StoreError::Internal(
                    "dispatch vanished under the lock".into(),
                ));
            };
            let claim = Claim {
                lease_token: token.clone(),
                lease_duration,
                attempt: dispatch.attempt + 1,
                max_attempts: dispatch.max_attempts,
                tool: dispatch.tool.clone(),
                request: record.request.clone(),
                waited: (now - record.task.created_at).to_std().ok(),
                in_session: session.is_some(),
            };
            let grant = LeaseGrant {
                token,
                owner: claimant.worker.clone(),
                duration: lease_duration,
                attempt: claim.attempt,
                session,
            };
            let effects = Effects::of_grant(grant, claim.max_attempts);
            super::apply::apply(&mut state, &key, &effects, now);
            self.commit(&mut state).await?;
            self.changed(&state, &key);
            // A worker took a job from its queue: room for a waiting one.
            self.wake_relay_if_jobs_wait(&state, now);
            claim
        };
        Ok(claim)
    }

    async fn renew(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
    ) -> Result<Renewal, StoreError> {
        let lease_duration = self.config().execution.lease_duration;
        let key = key(tenant.as_str(), task_id);
        let mut state = self.lock().await;
        let now = state.now();
        let Some(record) = state.tasks.get_mut(&key).filter(|r| r.is_live(now)) else {
            return Ok(Renewal::Stop(StopReason::for_task(None, false)));
        };
        let status = record.task.status;
        let held = record
            .dispatch
            .as_mut()
            .and_then(|d| d.lease.as_mut())
            .filter(|l| &l.token == lease);
        match held {
            Some(held) if !status.is_terminal() => {
                held.expires_at = now + delta(lease_duration);
                state.touch(&key);
                self.commit(&mut state).await?;
                Ok(Renewal::KeepRunning)
            }
            held => Ok(Renewal::Stop(StopReason::for_task(
                Some(status),
                held.is_some(),
            ))),
        }
    }

    async fn check(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
    ) -> Result<Renewal, StoreError> {
        let key = key(tenant.as_str(), task_id);
        let mut state = self.lock().await;
        let now = state.now();
        let record = state.tasks.get(&key).filter(|r| r.is_live(now));
        let ours = record
            .and_then(|r| r.dispatch.as_ref())
            .and_then(|d| d.lease.as_ref())
            .is_some_and(|l| &l.token == lease);
        Ok(Renewal::of_attempt(record.map(|r| r.task.status), ours))
    }

    async fn renew_session(
        &self,
        _worker: &str,
        session: &WorkerSession,
        open: bool,
    ) -> Result<SessionRenewal, StoreError> {
        let lease_duration = self.config().execution.lease_duration;
        let mut state = self.lock().await;
        let now = state.now();
        let expires_at = now + delta(lease_duration);
        match state.sessions.get_mut(session) {
            Some(expires) if *expires >= now => *expires = expires_at,
            // Expired and not yet forgotten by the reaper: over, as on
            // PostgreSQL (a worker opens a new session under a new id).
            Some(_) => return Ok(SessionRenewal::Over),
            None if open => {
                state.sessions.insert(session.clone(), expires_at);
            }
            None => return Ok(SessionRenewal::Over),
        }
        Ok(SessionRenewal::KeepRunning { lease_duration })
    }

    async fn release(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
        reason: ReleaseReason,
        message: &str,
    ) -> Result<ReleaseOutcome, StoreError> {
        let key = key(tenant.as_str(), task_id);
        let next = {
            let mut state = self.lock().await;
            let now = state.now();
            super::held_record(&mut state, &key, lease, now)?;
            let end = AttemptEnd::of_release(reason, message);
            let next = self.end_attempt(&mut state, &key, &end, now);
            if let ReleaseReason::BackOff { wait } = reason {
                pause(&mut state, &key, now + delta(wait));
            }
            self.commit(&mut state).await?;
            self.changed(&state, &key);
            next
        };
        self.inner.outbox.notify_one();
        next.outcome()
            .ok_or_else(|| StoreError::Internal("a held task was already terminal".into()))
    }

    async fn ask(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
        input_key: &InputKey,
        request: &InputRequest,
    ) -> Result<Option<JsonObject>, StoreError> {
        let key = key(tenant.as_str(), task_id);
        let mut state = self.lock().await;
        let now = state.now();
        let record = super::held_record(&mut state, &key, lease, now)?;
        let existing = record.questions.iter().find(|q| &q.key == input_key);
        let asked = match questions::ask(existing, request, record.questions.len())? {
            AskStep::Answered(answer) => return Ok(Some(answer)),
            AskStep::Waiting => false,
            AskStep::Ask => {
                record.questions.push(Question {
                    key: input_key.clone(),
                    request: request.clone(),
                    asked_at: now,
                    answer: None,
                });
                true
            }
        };
        let effects = waiting_effects(
            &record.open_requests(),
            record.task.status,
            record.task.status_message.as_deref(),
        );
        let applied = super::apply::apply(&mut state, &key, &effects, now);
        if applied || asked {
            state.touch(&key);
            self.commit(&mut state).await?;
            self.changed(&state, &key);
        }
        Ok(None)
    }
}

/// Pauses the key of the task under `key` (`domain::pause_key`) until
/// `until`; a later pause of the key wins.
fn pause(
    state: &mut super::state::State,
    key: &super::state::Key,
    until: chrono::DateTime<chrono::Utc>,
) {
    let Some(dispatch) = state.tasks.get(key).and_then(|r| r.dispatch.as_ref()) else {
        return;
    };
    let paused = crate::domain::pause_key(
        dispatch.rate.as_ref().map(|rate| rate.key.as_str()),
        dispatch.limit.as_ref().map(|limit| limit.key.as_str()),
    );
    let at = state
        .pauses
        .entry((dispatch.tool.as_str().to_owned(), paused.to_owned()))
        .or_insert(until);
    *at = (*at).max(until);
}
