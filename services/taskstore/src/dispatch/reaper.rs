//! The lease reaper: tasks whose worker stopped renewing its lease (crashed,
//! partitioned, frozen) are dispatched again, or failed once out of
//! attempts. A task is back in the queue at most `lease duration + interval`
//! after its worker's last renewal.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::store::execution::ExecutionStore;

pub fn spawn(
    store: Arc<dyn ExecutionStore>,
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
            match store.reap_expired_leases().await {
                Ok(0) => {}
                Ok(reaped) => tracing::info!(reaped, "expired leases reaped"),
                Err(err) => {
                    tracing::warn!(error = %err, "lease reaper failed; retrying next interval")
                }
            }
        }
    })
}
