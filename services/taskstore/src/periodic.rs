//! The background chores: each runs on an interval until shutdown, returns
//! how many items it handled, and is retried at the next interval when it
//! fails. None is needed for correctness at any moment (expired tasks are
//! invisible, silent workers are not listed); they reclaim space and give
//! crashed workers' tasks back. Several replicas may run them at once:
//! backends take disjoint batches.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::StoreError;
use crate::store::TaskStore;
use crate::store::execution::DispatchStore;
use crate::store::operations::OperationsStore;

/// How long a silent worker's row is kept (for nothing but the record).
const FORGET_WORKERS_AFTER: Duration = Duration::from_secs(600);

/// One background chore and the store it works on.
#[derive(Clone)]
pub enum Chore {
    /// Tasks whose lease expired are dispatched again, or failed when out
    /// of attempts.
    ReapExpiredLeases(Arc<dyn DispatchStore>),
    /// Expired tasks are deleted.
    SweepExpiredTasks(Arc<dyn TaskStore>),
    /// Workers silent for ten minutes are forgotten.
    ForgetSilentWorkers(Arc<dyn OperationsStore>),
    /// The gauges of the store (tasks by status, the outbox) are refreshed.
    SnapshotMetrics(Arc<dyn OperationsStore>),
}

impl std::fmt::Debug for Chore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.done())
    }
}

impl Chore {
    /// The log message for a run that handled something.
    fn done(&self) -> &'static str {
        match self {
            Chore::ReapExpiredLeases(_) => "expired leases reaped",
            Chore::SweepExpiredTasks(_) => "expired tasks deleted",
            Chore::ForgetSilentWorkers(_) => "silent workers forgotten",
            Chore::SnapshotMetrics(_) => "metrics snapshot taken",
        }
    }

    async fn run(&self) -> Result<u64, StoreError> {
        match self {
            Chore::ReapExpiredLeases(store) => store.reap_expired_leases().await,
            Chore::SweepExpiredTasks(store) => {
                let deleted = store.cleanup_expired().await?;
                crate::metrics::tasks_expired(deleted);
                Ok(deleted)
            }
            Chore::ForgetSilentWorkers(store) => {
                store.forget_silent_workers(FORGET_WORKERS_AFTER).await
            }
            Chore::SnapshotMetrics(store) => {
                let by_status = store.tasks_by_status().await?;
                let backlog = store.outbox_backlog().await?;
                crate::metrics::snapshot(&by_status, &backlog);
                crate::metrics::dispatch_snapshot(&store.dispatch_view().await?);
                // Nothing handled: nothing to log at every snapshot.
                Ok(0)
            }
        }
    }

    /// Runs the chore every `interval` until `shutdown` fires.
    pub fn spawn(self, interval: Duration, shutdown: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = ticker.tick() => {}
                }
                match self.run().await {
                    Ok(0) => {}
                    Ok(count) => tracing::info!(count, "{}", self.done()),
                    Err(err) => {
                        tracing::warn!(error = %err, chore = self.done(), "background chore failed; retrying next interval");
                    }
                }
            }
        })
    }
}
