//! Starting and stopping the service, the same way for `serve`, `dev` and
//! the tests: [`Service::build`] binds the listener and wires the parts
//! (so the address is known before anything runs), then
//! [`Service::run_until_stopped`] serves and, when told to stop, takes the
//! parts down in order: embedded workers, the gRPC server, the background
//! loops, the store.

mod backends;
mod dashboard;
mod embedded;
mod error;
mod loops;
mod mcp;
mod ports;
mod stop;

use std::net::SocketAddr;
use std::sync::Arc;

use taskstore_proto::credentials::BearerToken;
use taskworker::queue::InProcessQueue;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use self::backends::{Backends, migrate, open_keys};
pub use self::error::{Listener, StartupError};
use clap::ValueEnum as _;

use self::ports::Port;
use self::stop::{Phase, Stopping};
use crate::auth::{AuthMethod, Authenticator};
use crate::edge::Admissions;
use crate::grpc::{OperationsService, ServiceFacts, TaskExecutionService, TaskStoreService};
use crate::health::QueueHealth;
use crate::periodic::Chore;
use crate::server::Server;
use crate::settings::{MetricsSettings, QueueLocation, ServiceSettings};

/// `taskstore serve` and `taskstore dev`: opens the store, builds the
/// service and runs it until SIGTERM/SIGINT.
pub async fn serve(settings: ServiceSettings) -> Result<(), StartupError> {
    let stop = CancellationToken::new();
    tokio::spawn(taskworker::signals::cancel_on_signal(stop.clone()));
    let backends = Backends::open(
        &settings.store,
        settings.migrations,
        settings.pool,
        settings.config.clone(),
        &stop,
    )
    .await?;
    Service::build(settings, backends)
        .await?
        .run_until_stopped(stop)
        .await
}

/// A built, not yet running service: bound, with its parts wired.
pub struct Service {
    server: Server,
    addr: SocketAddr,
    backends: Backends,
    settings: ServiceSettings,
    queue_health: QueueHealth,
    /// The in-process queue, when the service has one.
    in_process: Option<InProcessQueue>,
    /// What the embedded workers present to the service.
    embedded_token: BearerToken,
    /// The MCP endpoint, bound, when the settings ask for one.
    mcp: Option<mcp::BoundGateway>,
    /// The web dashboard, bound, when the settings ask for one.
    dashboard: Option<dashboard::BoundDashboard>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("addr", &self.addr)
            .field("backends", &self.backends)
            .finish_non_exhaustive()
    }
}

impl Service {
    /// Binds the listener and wires the gRPC services to `backends`.
    pub async fn build(
        settings: ServiceSettings,
        backends: Backends,
    ) -> Result<Self, StartupError> {
        let queue_health = match settings.queue.as_ref().map(|q| &q.location) {
            Some(QueueLocation::RabbitMq(_)) => QueueHealth::default(),
            Some(QueueLocation::InProcess) | None => QueueHealth::always_up(),
        };
        let facts = ServiceFacts {
            backend: backends.name,
            queue_kind: match settings.queue.as_ref().map(|q| &q.location) {
                Some(QueueLocation::RabbitMq(_)) => "rabbitmq",
                Some(QueueLocation::InProcess) => "in-process",
                None => "none",
            },
            queue: queue_health.clone(),
        };
        let admissions = Arc::new(Admissions::new(settings.admission.clone()));
        let store = TaskStoreService::new(
            backends.store.clone(),
            backends.execution.clone(),
            backends.operations.clone(),
            settings.limits,
        )
        .with_max_result_wait(settings.max_result_wait)
        .with_admissions(admissions.clone())
        .with_insights(backends.insights.clone());
        let mut authenticator =
            Authenticator::new(&settings.auth, backends.keys.clone(), settings.jwt.as_ref())
                .map_err(StartupError::Config)?;
        // The gateway checks credentials as the gRPC port does, but never
        // accepts the embedded workers' token (workers do not speak MCP).
        let mcp = match &settings.mcp {
            Some(mcp_settings) => Some(
                mcp::bind(
                    mcp_settings,
                    &settings,
                    &backends,
                    authenticator.clone(),
                    admissions.clone(),
                )
                .await?,
            ),
            None => None,
        };
        let dashboard = match &settings.dashboard {
            Some(dashboard_settings) => Some(
                dashboard::bind(
                    dashboard_settings,
                    &settings,
                    &backends,
                    authenticator.clone(),
                    admissions,
                )
                .await?,
            ),
            None => None,
        };
        let embedded_token = authenticator
            .embedded_worker_token()
            .map_err(|err| StartupError::Config(format!("no randomness for a token: {err}")))?;
        let server = bind(&settings.listen, store)
            .await?
            .with_execution(
                TaskExecutionService::new(
                    backends.execution.clone(),
                    backends.operations.clone(),
                    backends.store.clone(),
                )
                .with_topology(broker_topology(&settings)),
            )
            .with_operations(OperationsService::new(backends.operations.clone(), facts))
            .with_shutdown_grace(settings.shutdown_grace)
            .with_authenticator(authenticator)
            .with_tls(settings.tls.as_ref());
        let addr = server.local_addr().map_err(|source| StartupError::Bind {
            port: Listener::Grpc,
            address: settings.listen.clone(),
            source,
        })?;
        let in_process = matches!(
            settings.queue.as_ref().map(|q| &q.location),
            Some(QueueLocation::InProcess)
        )
        .then(InProcessQueue::new);
        Ok(Self {
            server,
            addr,
            backends,
            settings,
            queue_health,
            in_process,
            embedded_token,
            mcp,
            dashboard,
        })
    }

    /// Where MCP is served, when it is.
    pub fn mcp_addr(&self) -> Option<SocketAddr> {
        self.mcp.as_ref().map(mcp::BoundGateway::local_addr)
    }

    /// Where the dashboard is served, when it is.
    pub fn dashboard_addr(&self) -> Option<SocketAddr> {
        self.dashboard
            .as_ref()
            .map(dashboard::BoundDashboard::local_addr)
    }

    /// The address the service listens on (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `stop` fires (or the server fails), then shuts down in
    /// order. Logs `listening` once the embedded workers are ready: a task
    /// dispatched after that line reaches a worker.
    pub async fn run_until_stopped(self, stop: CancellationToken) -> Result<(), StartupError> {
        let background = CancellationToken::new();
        let mut loops = Vec::new();
        if let Some(metrics) = &self.settings.metrics {
            loops.extend(self.serve_metrics(metrics, &background).await?);
        }
        let workers = match &self.in_process {
            Some(queue) => embedded::workers(
                &self.settings.embedded,
                self.addr,
                queue,
                &self.embedded_token,
            )?,
            None => Vec::new(),
        };
        let server_stop = CancellationToken::new();
        let mcp_addr = self.mcp_addr();
        let dashboard_url = self.dashboard_addr().map(|addr| {
            let base = self
                .settings
                .dashboard
                .as_ref()
                .map_or("", |d| d.base_path.as_str());
            format!("http://{addr}{base}/")
        });
        let mut mcp_served = self.mcp.map(|gateway| gateway.spawn(server_stop.clone()));
        let mut dashboard_served = self
            .dashboard
            .map(|dashboard| dashboard.spawn(server_stop.clone()));
        let mut served = tokio::spawn(self.server.run(server_stop.clone()));
        let workers = embedded::start_workers(workers, stop.child_token()).await;
        // The relay starts once the embedded workers consume: a job it
        // offered before would find no worker and be held for a while
        // (a task given back at the last stop would wait for nothing).
        let parts = loops::LoopParts {
            backends: &self.backends,
            settings: &self.settings,
            queue_health: &self.queue_health,
            in_process: self.in_process.as_ref(),
        };
        loops.extend(parts.spawn_loops(&background));
        warn_when_open(&self.settings.auth, self.addr);
        tracing::info!(
            addr = %self.addr,
            backend = self.backends.name,
            data = %self.backends.location,
            queue = match self.settings.queue.as_ref().map(|q| &q.location) {
                Some(QueueLocation::RabbitMq(_)) => "rabbitmq",
                Some(QueueLocation::InProcess) => "in-process",
                None => "none",
            },
            embedded_workers = workers.len(),
            auth = %auth_names(&self.settings.auth),
            mcp = %mcp_addr.map_or_else(|| "off".to_owned(), |addr| format!("http://{addr}/mcp")),
            dashboard = dashboard_url.as_deref().unwrap_or("off"),
            "listening"
        );

        // The MCP endpoint failing ends the service as the gRPC server
        // failing does: a replica half up would pass its probes.
        let (grpc_ended, mcp_failed) = tokio::select! {
            () = stop.cancelled() => (None, None),
            ended = &mut served => (Some(ended), None),
            failed = ports::ended(Port::Mcp, &mut mcp_served) => (None, Some(failed)),
            failed = ports::ended(Port::Dashboard, &mut dashboard_served) => (None, Some(failed)),
        };
        stop.cancel();
        // One deadline for the whole stop, from here (`stop.rs`).
        let stopping = Stopping::begin(self.settings.shutdown_grace);
        if !workers.is_empty() {
            tracing::info!(
                workers = workers.len(),
                "shutting down: stopping the embedded workers first"
            );
        }
        stopping.join(Phase::EmbeddedWorkers, workers).await;
        // The gRPC server's own grace, the MCP endpoint's and the
        // dashboard's start together and end by the deadline.
        server_stop.cancel();
        let deadline = stopping.deadline();
        let ports_stopped = async {
            tokio::join!(
                ports::stop_by(Port::Mcp, mcp_served, deadline),
                ports::stop_by(Port::Dashboard, dashboard_served, deadline),
            );
        };
        let grpc_stopped = async {
            match grpc_ended {
                Some(ended) => Some(ended),
                None => stopping.run(Phase::Listeners, &mut served).await,
            }
        };
        let (served, ()) = tokio::join!(grpc_stopped, ports_stopped);
        tracing::info!("shutting down: stopping the background loops");
        background.cancel();
        stopping.join(Phase::BackgroundLoops, loops).await;
        stopping.run(Phase::Store, self.backends.close()).await;
        tracing::info!("stopped");
        match (served, mcp_failed) {
            (_, Some(failed)) => Err(StartupError::from(failed)),
            (Some(Ok(result)), None) => result.map_err(StartupError::from),
            (Some(Err(err)), None) => Err(StartupError::Crashed(err.to_string())),
            // Dropped at the deadline (logged by the phase).
            (None, None) => Ok(()),
        }
    }

    /// The `/metrics` endpoint and the chore that refreshes the store's
    /// gauges. The recorder is process-wide: installed by the first service
    /// of the process that asks for metrics.
    async fn serve_metrics(
        &self,
        settings: &MetricsSettings,
        stop: &CancellationToken,
    ) -> Result<Vec<JoinHandle<()>>, StartupError> {
        let handle = taskstore_telemetry::metrics::install().map_err(StartupError::Metrics)?;
        crate::metrics::export_at_zero();
        let listener = tokio::net::TcpListener::bind(&settings.listen)
            .await
            .map_err(|source| StartupError::Bind {
                port: Listener::Metrics,
                address: settings.listen.clone(),
                source,
            })?;
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(addr = %addr, "serving metrics on /metrics");
        }
        let snapshot = Chore::SnapshotMetrics(self.backends.operations.clone());
        Ok(vec![
            taskstore_telemetry::metrics::serve(listener, handle, None, stop.clone()),
            snapshot.spawn(settings.snapshot_interval, stop.clone()),
        ])
    }
}

/// Says, once, that anyone who reaches the port may do anything.
fn warn_when_open(auth: &[AuthMethod], addr: SocketAddr) {
    if auth != [AuthMethod::None] {
        return;
    }
    if addr.ip().is_loopback() {
        tracing::info!(
            "authentication is off (--auth none): every process on this machine may read and change every task"
        );
    } else {
        tracing::warn!(addr = %addr, "authentication is off (--auth none): anyone who reaches this address may read and change every task; use --auth api-keys");
    }
}

fn auth_names(methods: &[AuthMethod]) -> String {
    methods
        .iter()
        .filter_map(|m| m.to_possible_value().map(|v| v.get_name().to_owned()))
        .collect::<Vec<_>>()
        .join(",")
}

/// Resolves `address` and binds the first of its addresses that can be
/// bound (`localhost` may stand for ::1 and 127.0.0.1).
async fn bind(address: &str, service: TaskStoreService) -> Result<Server, StartupError> {
    let candidates: Vec<SocketAddr> = tokio::net::lookup_host(address)
        .await
        .map_err(|err| StartupError::Resolve {
            address: address.to_owned(),
            reason: err.to_string(),
        })?
        .collect();
    let mut last_error = None;
    for candidate in candidates {
        match Server::bind(candidate, service.clone()).await {
            Ok(server) => return Ok(server),
            Err(err) => last_error = Some((candidate, err)),
        }
    }
    Err(match last_error {
        Some((candidate, source)) => StartupError::Bind {
            port: Listener::Grpc,
            address: candidate.to_string(),
            source,
        },
        None => StartupError::Resolve {
            address: address.to_owned(),
            reason: "the name has no addresses".to_owned(),
        },
    })
}

/// The broker topology workers are told, when jobs go to a broker.
fn broker_topology(settings: &ServiceSettings) -> Option<taskstore_proto::jobs::Topology> {
    let queue = settings.queue.as_ref()?;
    match queue.location {
        QueueLocation::RabbitMq(_) => Some(queue.topology.clone()),
        QueueLocation::InProcess => None,
    }
}
