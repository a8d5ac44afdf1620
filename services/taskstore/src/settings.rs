//! The service's configuration once it is resolved: what `serve` and `dev`
//! are told by their flags (`config`), and what tests build directly. The
//! startup takes this, never the flags, so that the configuration travels
//! one way: from the edge inward.

use std::path::PathBuf;
use std::time::Duration;

use taskstore_proto::jobs::Topology;

use crate::auth::AuthMethod;
use crate::auth::jwt::JwtSettings;
use crate::domain::AdmissionPolicy;
use crate::grpc::InputLimits;
use crate::store::StoreConfig;
use crate::store::postgres::PoolSettings;

/// Where tasks are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    Postgres(String),
    Sqlite(PathBuf),
    Memory,
}

/// Where jobs go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueLocation {
    RabbitMq(String),
    /// The in-process queue, consumed by embedded workers.
    InProcess,
}

/// Who migrates the database a service starts on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Migrations {
    /// The service applies pending migrations before it listens (one
    /// replica at a time, under an advisory lock).
    #[default]
    Apply,
    /// Someone else does (`taskstore migrate`, a migrations job): the
    /// service waits, not listening, until the database has every migration
    /// it knows, and refuses to start on one migrated by a different build.
    Await,
}

/// Faults the fault tests inject into a real service process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// Abort the process when the relay is about to publish a job: the task
    /// is committed, its job is not yet in the queue.
    CrashBeforePublish,
}

/// Everything a service is made of.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    /// `HOST:PORT`, resolved when the service binds.
    pub listen: String,
    /// How callers authenticate; `[None]` turns authentication off.
    pub auth: Vec<AuthMethod>,
    /// How JWTs are verified, with `AuthMethod::Jwt`.
    pub jwt: Option<JwtSettings>,
    /// TLS on the gRPC port; `None` is plaintext.
    pub tls: Option<ServerTls>,
    pub store: StoreLocation,
    pub migrations: Migrations,
    pub pool: PoolSettings,
    pub config: StoreConfig,
    pub limits: InputLimits,
    /// Each tenant's create rate and waiting calls, per replica.
    pub admission: AdmissionPolicy,
    /// How jobs reach workers; `None` runs no relay (tests that drive the
    /// outbox themselves).
    pub queue: Option<QueueSettings>,
    /// The periodic chores; `None` runs none (tests that drive them).
    pub chores: Option<ChoreSettings>,
    pub embedded: EmbeddedWorkers,
    /// Longest a waiting GetTaskResult blocks.
    pub max_result_wait: Duration,
    /// How long in-flight RPCs may take to finish on shutdown.
    pub shutdown_grace: Duration,
    /// The MCP endpoint; `None` is off.
    pub mcp: Option<crate::mcp::McpSettings>,
    /// The web dashboard; `None` is off.
    pub dashboard: Option<crate::dashboard::DashboardSettings>,
    /// Prometheus metrics on `GET /metrics` at this `HOST:PORT`; `None` is
    /// off.
    pub metrics: Option<MetricsSettings>,
}

/// The gRPC port's TLS: its certificate chain and key (PEM), and, for
/// mTLS, the CA that client certificates must chain to.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerTls {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    pub client_ca_pem: Option<Vec<u8>>,
    /// Refuse, at the handshake, clients without a certificate (when client
    /// certificates are the only way in).
    pub require_client_cert: bool,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("client_ca", &self.client_ca_pem.is_some())
            .field("require_client_cert", &self.require_client_cert)
            .finish_non_exhaustive()
    }
}

/// The metrics endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsSettings {
    pub listen: String,
    /// How often the store's gauges (tasks by status, the outbox) are
    /// refreshed: a count over the live tasks, so not too often on large
    /// tables.
    pub snapshot_interval: Duration,
}

/// The job queue and its relay.
#[derive(Debug, Clone)]
pub struct QueueSettings {
    pub location: QueueLocation,
    /// TLS to an `amqps://` broker: the CA to trust, the client certificate.
    pub broker_tls: taskstore_proto::endpoint::ClientTls,
    pub topology: Topology,
    /// How often the relay looks for due jobs without being woken.
    pub poll_interval: Duration,
    pub fault: Option<Fault>,
}

/// How often the background chores run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChoreSettings {
    pub reaper_interval: Duration,
    /// The sweep of expired tasks and silent workers; `None` is off.
    pub cleanup_interval: Option<Duration>,
}

/// Workers inside the service (with the in-process queue only).
#[derive(Debug, Clone, Default)]
pub struct EmbeddedWorkers {
    pub count: usize,
    pub concurrency: usize,
    /// Built-in tools they serve.
    pub tools: Vec<String>,
    pub command_tools: Option<PathBuf>,
    /// How long their running attempts may finish on shutdown (zero under
    /// `dev`: give them back at once).
    pub shutdown_grace: Duration,
    /// How long a question waits before its attempt parks.
    pub park_after: Duration,
}

impl ServiceSettings {
    /// A service on an ephemeral loopback port with no relay, no chores and
    /// no workers: what tests that drive those themselves start.
    pub fn bare(config: StoreConfig, limits: InputLimits) -> Self {
        Self {
            listen: "127.0.0.1:0".to_owned(),
            auth: vec![AuthMethod::None],
            jwt: None,
            tls: None,
            store: StoreLocation::Memory,
            migrations: Migrations::Apply,
            pool: PoolSettings::default(),
            config,
            limits,
            admission: AdmissionPolicy::default(),
            queue: None,
            chores: None,
            embedded: EmbeddedWorkers::default(),
            max_result_wait: Duration::from_secs(600),
            shutdown_grace: Duration::from_secs(2),
            mcp: None,
            dashboard: None,
            metrics: None,
        }
    }
}
