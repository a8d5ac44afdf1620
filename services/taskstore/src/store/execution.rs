//! The execution protocol's side of the store: claims, leases and releases
//! ([`ExecutionStore`], what workers call), the lease reaper and the outbox
//! relay ([`DispatchStore`], what the service's loops call). The decisions
//! live in `domain::execution`; backends apply them. The queue implements
//! [`JobPublisher`].

use async_trait::async_trait;
use taskstore_proto::jobs::JobMessage;

use crate::domain::{
    Claim, Claimant, InputKey, InputRequest, JsonObject, LeaseToken, QueueDepth, ReleaseOutcome,
    ReleaseReason, Renewal, SessionRenewal, TaskId, TenantId, WorkerSession,
};
use crate::error::StoreError;

/// The worker-facing side of the protocol: what `TaskExecution` serves,
/// and what a worker (or the gRPC client standing in for one) calls.
#[async_trait]
pub trait ExecutionStore: Send + Sync + 'static {
    /// Claims the task for one attempt, for dispatch `generation`. Refused
    /// (NOT_FOUND / FAILED_PRECONDITION) when the job is stale: the task is
    /// gone, terminal, claimed, or was dispatched again since.
    async fn claim_as(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        generation: u64,
        claimant: &Claimant,
    ) -> Result<Claim, StoreError>;

    /// [`ExecutionStore::claim_as`] by a worker that renews each attempt's
    /// lease itself.
    async fn claim(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        generation: u64,
        worker: &str,
    ) -> Result<Claim, StoreError> {
        self.claim_as(tenant, task_id, generation, &Claimant::per_task(worker))
            .await
    }

    /// Opens (`open`) or renews a worker's session for one lease duration:
    /// every attempt claimed in it stays alive, whatever their number.
    /// [`SessionRenewal::Over`] when a renewed session had expired or was
    /// never opened: its attempts must stop.
    async fn renew_session(
        &self,
        worker: &str,
        session: &WorkerSession,
        open: bool,
    ) -> Result<SessionRenewal, StoreError>;

    /// Extends a lease, or tells the worker to stop.
    async fn renew(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
    ) -> Result<Renewal, StoreError>;

    /// Whether the attempt holding `lease` goes on, without extending its
    /// lease: what a worker's follow of an attempt asks, which its session
    /// (or its own renewals) keeps alive. A read, not a write: a worker
    /// starting a thousand attempts must not commit a thousand renewals.
    /// (A store without a cheaper way renews.)
    async fn check(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
    ) -> Result<Renewal, StoreError> {
        self.renew(tenant, task_id, lease).await
    }

    /// Gives a claimed task back (see [`ReleaseReason`]).
    async fn release(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
        reason: ReleaseReason,
        message: &str,
    ) -> Result<ReleaseOutcome, StoreError>;

    /// Asks the task's caller `request` under `key`, for the attempt
    /// holding `lease`: the answer when the key was answered before, else
    /// `None` while the question waits (the task is `input_required` and
    /// says what is asked). The rules are `domain::questions::ask`.
    async fn ask(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
        key: &InputKey,
        request: &InputRequest,
    ) -> Result<Option<JsonObject>, StoreError>;
}

/// The service's own side of the protocol: what its background loops do.
#[async_trait]
pub trait DispatchStore: Send + Sync + 'static {
    /// Dispatches again (or fails, when out of attempts) every task whose
    /// lease expired; returns how many. Safe to run on several replicas.
    async fn reap_expired_leases(&self) -> Result<u64, StoreError>;

    /// Takes up to `limit` due jobs for the relay to publish (dropping the
    /// stale ones: their task is gone, ended, claimed or dispatched again),
    /// no more of a tool than `queue` has room for (`JobPublisher::room`),
    /// chosen among those waiting by `domain::next_jobs`. A taken job is
    /// not offered to another relay until it is settled or its grace runs
    /// out, so several replicas may relay at once without publishing a job
    /// twice.
    async fn take_due_jobs(
        &self,
        limit: u32,
        queue: &dyn JobPublisher,
    ) -> Result<Vec<DueJob>, StoreError>;

    /// Forgets the outbox entries of jobs the queue took.
    async fn forget_jobs(&self, queued: &[i64]) -> Result<(), StoreError>;

    /// No queue takes `job` (no worker ever served its tool): it is
    /// offered again after the `unroutable_retry`, and its task's message
    /// says that it waits for a worker (`Effects::of_waiting_for_worker`).
    async fn hold_for_worker(&self, job: &DueJob) -> Result<(), StoreError>;

    /// The queue could not take these jobs: they fall due again at once,
    /// for the next pass. Best effort: a job left in flight falls due at
    /// the end of its grace anyway.
    async fn leave_to_outbox(&self, unsent: &[i64]);

    /// Records what the queue did with each of `jobs` (`outcomes` in the
    /// same order): a queued job is forgotten, one no queue takes waits for
    /// a worker, one the queue could not take falls due again at once.
    /// Returns how many were queued, or UNAVAILABLE when any could not be
    /// (after settling them all).
    async fn settle_jobs(
        &self,
        jobs: &[DueJob],
        outcomes: Vec<Result<Published, PublishError>>,
    ) -> Result<u64, StoreError> {
        let settlement = Settlement::of(jobs, outcomes);
        // The unsent first: a failure below must not strand them in flight.
        if settlement.failure.is_some() {
            self.leave_to_outbox(&settlement.unsent).await;
        }
        self.forget_jobs(&settlement.queued).await?;
        for job in settlement.unroutable {
            self.hold_for_worker(job).await?;
        }
        match settlement.failure {
            Some(err) => Err(StoreError::Unavailable(err.to_string())),
            None => Ok(settlement.queued.len() as u64),
        }
    }

    /// One pass of the relay: take the due jobs, publish them in one batch
    /// (the queue, not the store, talks to the broker), settle them; how
    /// many were queued.
    async fn relay_due_jobs(
        &self,
        publisher: &dyn JobPublisher,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let jobs = self.take_due_jobs(limit, publisher).await?;
        if jobs.is_empty() {
            return Ok(0);
        }
        let messages: Vec<JobMessage> = jobs.iter().map(|job| job.message.clone()).collect();
        let outcomes = publisher.publish_all(&messages).await;
        self.settle_jobs(&jobs, outcomes).await
    }

    /// Wakes when a job is written to the outbox, on any replica.
    fn outbox_signal(&self) -> std::sync::Arc<tokio::sync::Notify>;
}

/// A job taken from the outbox for publishing: its row, and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueJob {
    /// The backend's id of the job's outbox entry.
    pub outbox_id: i64,
    pub message: JobMessage,
}

/// The jobs of a relay pass sorted by what the queue did with them.
#[derive(Debug, Default)]
struct Settlement<'a> {
    /// The outbox ids of the jobs the queue took.
    queued: Vec<i64>,
    /// The jobs no queue takes.
    unroutable: Vec<&'a DueJob>,
    /// The outbox ids of the jobs the queue could not take.
    unsent: Vec<i64>,
    /// Why the first of those could not be.
    failure: Option<PublishError>,
}

impl<'a> Settlement<'a> {
    fn of(jobs: &'a [DueJob], outcomes: Vec<Result<Published, PublishError>>) -> Self {
        let mut settlement = Settlement::default();
        for (job, outcome) in jobs.iter().zip(outcomes) {
            match outcome {
                Ok(Published::Queued) => settlement.queued.push(job.outbox_id),
                Ok(Published::NoWorkerForTool) => settlement.unroutable.push(job),
                Err(err) => {
                    settlement.unsent.push(job.outbox_id);
                    settlement.failure.get_or_insert(err);
                }
            }
        }
        settlement
    }
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

    /// What `tool`'s queue holds now (ready jobs, consumers), so that the
    /// relay adds only what its consumers take next and a backlog waits in
    /// the store, where what goes next is still decided
    /// (`domain::next_jobs`). `None`: the queue cannot tell, and takes
    /// everything at once.
    async fn depth(&self, _tool: &str) -> Option<QueueDepth> {
        None
    }
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

/// Logged once per task (when its status message changes), not per retry.
pub(crate) fn log_held_for_worker(task_id: &str, tool: &str) {
    crate::metrics::job_held();
    tracing::warn!(
        task_id,
        tool,
        "no worker serves the tool; the job is held and offered again until one does"
    );
}
