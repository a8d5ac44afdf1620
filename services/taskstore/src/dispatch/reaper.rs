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
    crate::periodic::spawn("expired leases reaped", interval, shutdown, move || {
        let store = store.clone();
        async move { store.reap_expired_leases().await }
    })
}
