//! Workers inside the service, for the in-process queue: they talk to the
//! service over loopback gRPC exactly as `taskworker` processes do, and get
//! their tools the same way (`taskworker::tools::register`).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use taskstore_proto::credentials::BearerToken;
use taskworker::queue::InProcessQueue;
use taskworker::tools::register;
use taskworker::{JobSource, Worker, WorkerConfig};

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
