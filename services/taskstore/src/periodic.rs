//! Background jobs that run on an interval until shutdown: the expired-task
//! sweep and the lease reaper. Each run returns how many items it handled;
//! failures are logged and retried at the next interval.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::StoreError;

/// Runs `job` every `interval` until `shutdown` fires. `done` is the log
/// message for a run that handled something (e.g. "expired tasks deleted").
pub fn spawn<F, Fut>(
    done: &'static str,
    interval: Duration,
    shutdown: CancellationToken,
    mut job: F,
) -> JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Result<u64, StoreError>> + Send,
{
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = ticker.tick() => {}
            }
            match job().await {
                Ok(0) => {}
                Ok(count) => tracing::info!(count, "{done}"),
                Err(err) => {
                    tracing::warn!(error = %err, job = done, "background job failed; retrying next interval");
                }
            }
        }
    })
}
