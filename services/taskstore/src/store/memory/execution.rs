//! The execution protocol in memory: the same claims, leases, releases,
//! reaper and outbox as PostgreSQL, with one lock instead of row locks.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use taskstore_proto::jobs::JobMessage;
use tokio::sync::Notify;

use super::MemoryTaskStore;
use super::state::{Key, Lease, State, delta, key};
use crate::domain::{
    Claim, ExecutionPolicy, JsonObject, LeaseToken, ReleaseOutcome, ReleaseReason, Renewal, TaskId,
    TaskStatus, TenantId,
};
use crate::error::StoreError;
use crate::store::already_terminal;
use crate::store::execution::messages::{self, error_result, lease_lost};
use crate::store::execution::{ExecutionStore, JobPublisher, Published};

/// Dispatches a held task again: new generation, job due after `delay`.
fn requeue(
    state: &mut State,
    key: &Key,
    attempt_delta: i64,
    delay: Duration,
    message: String,
    now: DateTime<Utc>,
) {
    let Some(record) = state.tasks.get_mut(key) else {
        return;
    };
    let Some(dispatch) = record.dispatch.as_mut() else {
        return;
    };
    dispatch.lease = None;
    dispatch.attempt = u32::try_from(i64::from(dispatch.attempt) + attempt_delta).unwrap_or(0);
    dispatch.generation += 1;
    let (generation, tool) = (dispatch.generation, dispatch.tool.clone());
    record.task.status_message = Some(message);
    record.task.last_updated_at = now;
    state.touch(key);
    state.enqueue(key.clone(), generation, &tool, now + delta(delay));
}

/// Ends a held task as FAILED with an error result.
fn give_up(state: &mut State, key: &Key, message: String, now: DateTime<Utc>) {
    let Some(record) = state.tasks.get_mut(key) else {
        return;
    };
    if let Some(dispatch) = record.dispatch.as_mut() {
        dispatch.lease = None;
    }
    record.result = JsonObject::parse(error_result(&message)).ok();
    record.transition(TaskStatus::Failed, Some(message), now);
    state.touch(key);
}

fn held_lease_owner(state: &State, key: &Key) -> String {
    state
        .tasks
        .get(key)
        .and_then(|r| r.dispatch.as_ref())
        .and_then(|d| d.lease.as_ref())
        .map_or_else(|| "a worker".to_owned(), |l| l.owner.clone())
}

#[async_trait]
impl ExecutionStore for MemoryTaskStore {
    async fn claim(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        generation: u64,
        worker: &str,
    ) -> Result<Claim, StoreError> {
        let token = crate::store::new_lease_token()?;
        let lease_duration = self.config().execution.lease_duration;
        let key = key(tenant.as_str(), task_id);
        let (claim, status) = {
            let mut state = self.lock().await;
            let now = state.now();
            let record = state
                .tasks
                .get_mut(&key)
                .filter(|r| r.is_live(now))
                .ok_or(StoreError::NotFound)?;
            let status = record.task.status;
            let claimable = record
                .dispatch
                .as_ref()
                .map(|d| (d.generation == generation, d.lease.is_some()));
            let (Some((true, false)), false) = (claimable, status.is_terminal()) else {
                let (current, claimed) = claimable.unwrap_or((false, false));
                return Err(messages::claim_refused(
                    status,
                    claimable.is_some(),
                    current,
                    claimed,
                ));
            };
            let request = record.request.clone();
            let Some(dispatch) = record.dispatch.as_mut() else {
                return Err(StoreError::Internal(
                    "dispatch vanished under the lock".into(),
                ));
            };
            dispatch.attempt += 1;
            dispatch.lease = Some(Lease {
                token: token.clone(),
                owner: worker.to_owned(),
                expires_at: now + delta(lease_duration),
            });
            let claim = Claim {
                lease_token: token,
                lease_duration,
                attempt: dispatch.attempt,
                max_attempts: dispatch.max_attempts,
                tool: dispatch.tool.clone(),
                request,
            };
            record.task.status_message = Some(messages::running(
                worker,
                claim.attempt.into(),
                claim.max_attempts.into(),
            ));
            record.task.last_updated_at = now;
            state.touch(&key);
            self.commit(&mut state).await?;
            (claim, status)
        };
        // A claim changes the message, never the status.
        self.changed(&key, Some(status));
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
            return Ok(Renewal::Stop(messages::stop_reason(None, false)));
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
            held => Ok(Renewal::Stop(messages::stop_reason(
                Some(status),
                held.is_some(),
            ))),
        }
    }

    async fn release(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
        reason: ReleaseReason,
        message: &str,
    ) -> Result<ReleaseOutcome, StoreError> {
        let policy = self.config().execution;
        let key = key(tenant.as_str(), task_id);
        let outcome = {
            let mut state = self.lock().await;
            let now = state.now();
            let record = state
                .tasks
                .get(&key)
                .filter(|r| r.is_live(now))
                .ok_or(StoreError::NotFound)?;
            if record.task.status.is_terminal() {
                return Err(already_terminal(record.task.status));
            }
            let Some(dispatch) = record
                .dispatch
                .as_ref()
                .filter(|d| d.lease.as_ref().is_some_and(|l| &l.token == lease))
            else {
                return Err(lease_lost());
            };
            let (attempt, max) = (
                i64::from(dispatch.attempt),
                i64::from(dispatch.max_attempts),
            );
            let owner = held_lease_owner(&state, &key);
            let outcome = match reason {
                ReleaseReason::Shutdown => {
                    requeue(
                        &mut state,
                        &key,
                        -1,
                        Duration::ZERO,
                        messages::requeued_on_shutdown(&owner),
                        now,
                    );
                    ReleaseOutcome::Retry {
                        after: Duration::ZERO,
                    }
                }
                ReleaseReason::RetryableError if attempt < max => {
                    let after = policy.backoff(
                        u32::try_from(attempt).unwrap_or(0),
                        ExecutionPolicy::jitter(),
                    );
                    requeue(
                        &mut state,
                        &key,
                        0,
                        after,
                        messages::retrying(attempt, max, message, after),
                        now,
                    );
                    ReleaseOutcome::Retry { after }
                }
                ReleaseReason::RetryableError => {
                    give_up(&mut state, &key, messages::failed_after(max, message), now);
                    ReleaseOutcome::Failed
                }
            };
            self.commit(&mut state).await?;
            outcome
        };
        self.changed(&key, None);
        self.inner.outbox.notify_one();
        Ok(outcome)
    }

    async fn reap_expired_leases(&self) -> Result<u64, StoreError> {
        let reaped: Vec<Key> = {
            let mut state = self.lock().await;
            let now = state.now();
            let expired: Vec<(Key, i64, i64)> = state
                .tasks
                .iter()
                .filter(|(_, r)| r.is_live(now) && !r.task.status.is_terminal())
                .filter_map(|(k, r)| {
                    let d = r.dispatch.as_ref()?;
                    let lease = d.lease.as_ref()?;
                    (lease.expires_at < now)
                        .then(|| (k.clone(), i64::from(d.attempt), i64::from(d.max_attempts)))
                })
                .collect();
            for (key, attempt, max) in &expired {
                let owner = held_lease_owner(&state, key);
                tracing::warn!(task_id = %key.1, attempt, "lease expired");
                if attempt >= max {
                    give_up(
                        &mut state,
                        key,
                        messages::lease_expired_failed(&owner, *max),
                        now,
                    );
                } else {
                    requeue(
                        &mut state,
                        key,
                        0,
                        Duration::ZERO,
                        messages::lease_expired_retry(&owner, *attempt, *max),
                        now,
                    );
                }
            }
            self.commit(&mut state).await?;
            expired.into_iter().map(|(key, _, _)| key).collect()
        };
        for key in &reaped {
            self.changed(key, None);
        }
        if !reaped.is_empty() {
            self.inner.outbox.notify_one();
        }
        Ok(reaped.len() as u64)
    }

    async fn relay_due_jobs(
        &self,
        publisher: &dyn JobPublisher,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let taken: Vec<(u64, JobMessage)> = {
            let mut state = self.lock().await;
            let now = state.now();
            let stale: Vec<u64> = state
                .outbox
                .iter()
                .filter(|j| !state.job_is_current(j, now))
                .map(|j| j.id)
                .collect();
            state.remove_jobs(|job| stale.contains(&job.id));
            self.commit(&mut state).await?;
            let mut due: Vec<_> = state
                .outbox
                .iter_mut()
                .filter(|j| !j.in_flight && j.available_at <= now)
                .collect();
            due.sort_by_key(|j| (j.available_at, j.id));
            due.into_iter()
                .take(limit as usize)
                .map(|job| {
                    job.in_flight = true;
                    let message = JobMessage {
                        tenant_id: job.key.0.clone(),
                        task_id: job.key.1.clone(),
                        generation: job.generation,
                        tool: job.tool.clone(),
                    };
                    (job.id, message)
                })
                .collect()
        };
        let mut published = 0;
        for (index, (id, job)) in taken.iter().enumerate() {
            let outcome = publisher.publish(job).await;
            let mut state = self.lock().await;
            let now = state.now();
            match outcome {
                Ok(Published::Queued) => {
                    state.remove_jobs(|j| j.id == *id);
                    self.commit(&mut state).await?;
                    published += 1;
                }
                Ok(Published::NoWorkerForTool) => {
                    let retry = self.config().execution.unroutable_retry;
                    if let Some(held) = state.outbox.iter_mut().find(|j| j.id == *id) {
                        held.in_flight = false;
                        held.available_at = now + delta(retry);
                        state.dirty_jobs.insert(*id);
                    }
                    let note = messages::waiting_for_worker(&job.tool);
                    let key = (job.tenant_id.clone(), job.task_id.clone());
                    let mut changed = false;
                    if let Some(record) = state.tasks.get_mut(&key)
                        && record.task.status_message.as_deref() != Some(note.as_str())
                    {
                        record.task.status_message = Some(note);
                        record.task.last_updated_at = now;
                        state.touch(&key);
                        changed = true;
                    }
                    self.commit(&mut state).await?;
                    drop(state);
                    if changed {
                        self.changed(&key, None);
                    }
                }
                Err(err) => {
                    let unsent: Vec<u64> = taken[index..].iter().map(|(id, _)| *id).collect();
                    for job in state.outbox.iter_mut().filter(|j| unsent.contains(&j.id)) {
                        job.in_flight = false;
                    }
                    return Err(StoreError::Unavailable(err.to_string()));
                }
            }
        }
        Ok(published)
    }

    fn outbox_signal(&self) -> Arc<Notify> {
        self.inner.outbox.clone()
    }
}
