//! Workers inside the service, for the in-process queue: they talk to the
//! service over loopback gRPC exactly as `taskworker` processes do, and get
//! their tools the same way (`taskworker::tools::register`).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use std::time::Duration;

use taskstore_proto::credentials::BearerToken;
use taskworker::queue::InProcessQueue;
use taskworker::tools::register;
use taskworker::{JobSource, Worker, WorkerConfig};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::StartupError;
use crate::settings::EmbeddedWorkers;

/// The embedded workers of `settings`, for a service bound at `addr`.
pub(super) fn workers(
    settings: &EmbeddedWorkers,
    addr: SocketAddr,
    queue: &InProcessQueue,
    token: &BearerToken,
) -> Result<Vec<Worker>, StartupError> {
    let mut target = addr;
    if addr.ip().is_unspecified() {
        target.set_ip(match addr {
            SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        });
    }
    (0..settings.count)
        .map(|index| {
            let config = WorkerConfig {
                endpoint: format!("http://{target}"),
                source: JobSource::InProcess(queue.clone()),
                worker_id: format!("embedded-{index}"),
                concurrency: settings.concurrency,
                shutdown_grace: settings.shutdown_grace,
                park_after: settings.park_after,
                token: token.clone(),
                // Plaintext on loopback: `serve` refuses TLS with embedded workers.
                tls: Default::default(),
            };
            register(
                Worker::new(config),
                &settings.tools,
                settings.command_tools.as_deref(),
            )
            .map_err(StartupError::Config)
        })
        .collect()
}

/// How long startup waits for the embedded workers to register.
const WORKERS_READY_WITHIN: Duration = Duration::from_secs(10);

/// Starts the embedded workers and waits (a while) until each is
/// registered and consuming.
pub(super) async fn start_workers(
    workers: Vec<Worker>,
    stop: CancellationToken,
) -> Vec<JoinHandle<Result<(), taskworker::WorkerError>>> {
    let mut readiness = Vec::new();
    let running: Vec<_> = workers
        .into_iter()
        .map(|worker| {
            let (ready, is_ready) = tokio::sync::oneshot::channel();
            readiness.push(is_ready);
            tokio::spawn(worker.with_ready_signal(ready).run(stop.clone()))
        })
        .collect();
    let all_ready = async {
        for signal in readiness {
            // A dropped sender (a worker that stopped) counts as done.
            let _ = signal.await;
        }
    };
    if tokio::time::timeout(WORKERS_READY_WITHIN, all_ready)
        .await
        .is_err()
    {
        tracing::warn!("the embedded workers are not ready yet; serving anyway");
    }
    running
}
