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
}
