//! The outbox relay: publishes committed jobs to the queue, then deletes
//! them. It wakes at once when this replica writes a job (in-process
//! signal) and polls for everything else that is due: jobs of a replica that
//! crashed after its commit or cannot reach the queue, and retries whose
//! delay is over (migration 0008 says why other replicas are not notified).
//! While the queue is down the outbox keeps every job and the relay
//! reconnects with backoff; it logs each change of the queue's
//! state once (not every retry) and records it in [`QueueHealth`], as it
//! does when the broker holds publishes (a memory or disk alarm blocks the
//! connection): the jobs stay in the outbox and are published when it
//! clears.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::health::QueueHealth;
use crate::store::execution::{DispatchStore, JobPublisher, PublishError};

/// Jobs taken from the outbox per transaction.
const BATCH: u32 = 100;
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// A publisher that can tell when it must be replaced.
pub trait Publisher: JobPublisher {
    fn is_connected(&self) -> bool;

    /// Whether the queue refuses publishes for now (a broker's resource
    /// alarm), though connected.
    fn is_blocked(&self) -> bool {
        false
    }
}

/// Makes a new publisher (a new connection) when there is none.
pub type Connect<P> =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<P, PublishError>> + Send>> + Send + Sync>;

/// Relays until `shutdown` fires, keeping `health` up to date.
pub fn spawn<P: Publisher + 'static>(
    store: Arc<dyn DispatchStore>,
    connect: Connect<P>,
    poll_interval: Duration,
    health: QueueHealth,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let wake = store.outbox_signal();
        let mut publisher: Option<P> = None;
        let mut backoff = Duration::from_millis(100);
        loop {
            if shutdown.is_cancelled() {
                return;
            }
            let current = match publisher.take().filter(P::is_connected) {
                Some(current) => current,
                None => match connect().await {
                    Ok(fresh) => {
                        if health.up() {
                            tracing::info!("job queue reachable; relaying jobs from the outbox");
                        }
                        fresh
                    }
                    Err(err) => {
                        if health.down(err.to_string()) {
                            tracing::warn!(error = %err, "job queue unreachable; tasks are still accepted and their jobs wait in the outbox until it is back");
                        } else {
                            tracing::debug!(error = %err, retry_in_ms = backoff.as_millis() as u64, "job queue still unreachable");
                        }
                        sleep_or_stop(backoff, &shutdown).await;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                        continue;
                    }
                },
            };
            let relayed = store.relay_due_jobs(&current, BATCH).await;
            note_blocked(&health, current.is_blocked());
            match relayed {
                Ok(published) => {
                    crate::metrics::jobs_relayed(published);
                    backoff = Duration::from_millis(100);
                    if published > 0 {
                        tracing::debug!(published, "jobs relayed");
                    }
                    publisher = Some(current);
                    if published < u64::from(BATCH) {
                        tokio::select! {
                            () = shutdown.cancelled() => return,
                            () = wake.notified() => {}
                            () = tokio::time::sleep(poll_interval) => {}
                        }
                    }
                }
                Err(err) => {
                    // Either side may be down: keep the publisher only if it
                    // still looks healthy, and back off. A broken publisher
                    // means the queue went away.
                    if !current.is_connected() && health.down(err.to_string()) {
                        tracing::warn!(error = %err, "job queue connection lost; jobs wait in the outbox until it is back");
                    } else {
                        tracing::warn!(error = %err, retry_in_ms = backoff.as_millis() as u64, "relaying jobs failed; retrying");
                    }
                    publisher = Some(current);
                    sleep_or_stop(backoff, &shutdown).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    })
}

/// Records whether the queue holds publishes, saying so once per change.
fn note_blocked(health: &QueueHealth, blocked: bool) {
    if health.blocked(blocked) {
        if blocked {
            tracing::warn!(
                "job queue blocked: the broker holds publishes (a memory or disk alarm, or overload); tasks are still accepted and their jobs wait in the outbox until it clears"
            );
        } else {
            tracing::info!("job queue unblocked; relaying jobs from the outbox");
        }
    }
}

async fn sleep_or_stop(delay: Duration, shutdown: &CancellationToken) {
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = tokio::time::sleep(delay) => {}
    }
}
