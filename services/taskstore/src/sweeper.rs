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
    crate::periodic::spawn("expired tasks deleted", interval, shutdown, move || {
        let store = store.clone();
        async move { store.cleanup_expired().await }
    })
}
