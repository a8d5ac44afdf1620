//! The background sweep that deletes expired tasks. Expired tasks are
//! invisible without it; it only reclaims space. Several replicas may sweep
//! at once: backends delete in batches that do not overlap.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::store::TaskStore;

/// Sweeps every `interval` until `shutdown` fires.
pub fn spawn(
    store: Arc<dyn TaskStore>,
    interval: Duration,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = ticker.tick() => {}
            }
            match store.cleanup_expired().await {
                Ok(0) => {}
                Ok(deleted) => tracing::info!(deleted, "expired tasks deleted"),
                Err(err) => {
                    tracing::warn!(error = %err, "expired task sweep failed; retrying next interval")
                }
            }
        }
    })
}
