//! The execution protocol's side of the store: claims, leases, releases,
//! the lease reaper and the outbox relay. Backends implement
//! [`ExecutionStore`]; the queue implements [`JobPublisher`].

use async_trait::async_trait;
use taskstore_proto::jobs::JobMessage;

use crate::domain::{Claim, LeaseToken, ReleaseOutcome, ReleaseReason, Renewal, TaskId, TenantId};
use crate::error::StoreError;

#[async_trait]
pub trait ExecutionStore: Send + Sync + 'static {
    /// Claims the task for one attempt, for dispatch `generation`. Refused
    /// (NOT_FOUND / FAILED_PRECONDITION) when the job is stale: the task is
    /// gone, terminal, claimed, or was dispatched again since.
    async fn claim(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        generation: u64,
        worker: &str,
    ) -> Result<Claim, StoreError>;

    /// Extends a lease, or tells the worker to stop.
    async fn renew(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
    ) -> Result<Renewal, StoreError>;

    /// Gives a claimed task back (see [`ReleaseReason`]).
    async fn release(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
        reason: ReleaseReason,
        message: &str,
    ) -> Result<ReleaseOutcome, StoreError>;

    /// Dispatches again (or fails, when out of attempts) every task whose
    /// lease expired; returns how many. Safe to run on several replicas.
    async fn reap_expired_leases(&self) -> Result<u64, StoreError>;

    /// Publishes due jobs from the outbox, deleting each once the queue
    /// confirmed it; returns how many were published. Several replicas may
    /// relay at once without publishing a row twice.
    async fn relay_due_jobs(
        &self,
        publisher: &dyn JobPublisher,
        limit: u32,
    ) -> Result<u64, StoreError>;

    /// Wakes when a job is written to the outbox, on any replica.
    fn outbox_signal(&self) -> std::sync::Arc<tokio::sync::Notify>;
}

/// What the queue did with a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// Stored durably in a queue that workers of the tool consume.
    Queued,
    /// No queue takes jobs for this tool: no worker ever served it.
    NoWorkerForTool,
}

/// The queue could not take the job; the outbox keeps it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job queue unavailable: {0}")]
pub struct PublishError(pub String);

/// Where jobs go: RabbitMQ, or the in-process queue.
#[async_trait]
pub trait JobPublisher: Send + Sync {
    /// Publishes one job and waits for the queue's confirmation.
    async fn publish(&self, job: &JobMessage) -> Result<Published, PublishError>;

    /// Publishes a batch and returns one outcome per job, in order. A queue
    /// that confirms asynchronously sends them all before waiting, so a batch
    /// costs one round trip rather than one per job. Deliberately without a
    /// default: a wrapper that forgot to forward it would silently fall back
    /// to one round trip per job (it once halved the e2e throughput).
    /// Publishers without pipelining use [`publish_each`].
    async fn publish_all(&self, jobs: &[JobMessage]) -> Vec<Result<Published, PublishError>>;
}

/// `publish_all` for a publisher that has nothing to pipeline: one job after
/// the other.
pub async fn publish_each<P: JobPublisher + ?Sized>(
    publisher: &P,
    jobs: &[JobMessage],
) -> Vec<Result<Published, PublishError>> {
    let mut outcomes = Vec::with_capacity(jobs.len());
    for job in jobs {
        outcomes.push(publisher.publish(job).await);
    }
    outcomes
}

/// The protocol's status messages and refusals, shared by every backend so
/// that users see the same words whichever store runs.
pub(crate) mod messages {
    use std::time::Duration;

    use crate::domain::TaskStatus;
    use crate::error::StoreError;

    pub(crate) fn running(worker: &str, attempt: i64, max_attempts: i64) -> String {
        format!("running on {worker} (attempt {attempt} of {max_attempts})")
    }

    pub(crate) fn waiting_for_worker(tool: &str) -> String {
        format!("waiting for a worker that serves tool {tool}")
    }

    pub(crate) fn lease_expired_retry(owner: &str, attempt: i64, max_attempts: i64) -> String {
        format!(
            "attempt {attempt} of {max_attempts}: the worker running it ({owner}) stopped renewing its lease; dispatched again"
        )
    }

    pub(crate) fn lease_expired_failed(owner: &str, max_attempts: i64) -> String {
        format!(
            "failed after {max_attempts} attempts: the worker running it ({owner}) stopped renewing its lease"
        )
    }

    pub(crate) fn retrying(
        attempt: i64,
        max_attempts: i64,
        error: &str,
        after: Duration,
    ) -> String {
        let after = humantime::format_duration(Duration::from_millis(
            u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
        ));
        format!("attempt {attempt} of {max_attempts} failed: {error}; retrying in {after}")
    }

    pub(crate) fn failed_after(max_attempts: i64, error: &str) -> String {
        format!("failed after {max_attempts} attempts: {error}")
    }

    pub(crate) fn requeued_on_shutdown(owner: &str) -> String {
        format!("requeued: the worker running it ({owner}) shut down")
    }

    /// Why a renewal says stop.
    pub(crate) fn stop_reason(status: Option<TaskStatus>, ours: bool) -> String {
        match status {
            None => "the task no longer exists (expired or deleted)".to_owned(),
            Some(TaskStatus::Cancelled) => "the task was cancelled".to_owned(),
            Some(_) if !ours => "the lease was lost: the task was dispatched again".to_owned(),
            Some(status) => format!("the task is already {status}"),
        }
    }

    /// Why a claim was refused, given what the task looks like now.
    pub(crate) fn claim_refused(
        status: TaskStatus,
        dispatched: bool,
        current_generation: bool,
        claimed: bool,
    ) -> StoreError {
        if status.is_terminal() {
            crate::store::already_terminal(status)
        } else if !dispatched {
            StoreError::FailedPrecondition("task is not dispatched to workers".into())
        } else if !current_generation {
            StoreError::FailedPrecondition("stale job: the task was dispatched again since".into())
        } else if claimed {
            StoreError::FailedPrecondition("task is already claimed by another worker".into())
        } else {
            StoreError::FailedPrecondition("task cannot be claimed now".into())
        }
    }

    pub(crate) fn lease_lost() -> StoreError {
        StoreError::FailedPrecondition(
            "this attempt's lease is no longer current: the task was released or claimed again"
                .into(),
        )
    }

    /// A CallToolResult for a task that failed outside its tool's control.
    pub(crate) fn error_result(message: &str) -> String {
        serde_json::json!({
            "content": [{ "type": "text", "text": message }],
            "isError": true,
        })
        .to_string()
    }
}
