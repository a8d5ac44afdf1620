//! Why the service could not start, or stopped abnormally: each failure
//! with what to do about it (a taken port names the flag that moves it).

/// Why the service could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("invalid database url: {0}")]
    DatabaseUrl(sqlx::Error),
    #[error("{0}")]
    DatabaseUnreachable(String),
    #[error("migrations failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("{0}")]
    MigrationsPending(String),
    #[error(
        "the database was migrated by a different build of taskstore (migrations {0:?} differ from this binary's): deploy the matching release"
    )]
    MigrationsDiffer(Vec<i64>),
    #[error("could not open the store: {0}")]
    Store(crate::StoreError),
    #[error(
        "cannot resolve --listen {address}: {reason}; use an IP address and port such as 127.0.0.1:50051"
    )]
    Resolve { address: String, reason: String },
    #[error("could not listen on {address}: {source}{}", bind_hint(.source, .port))]
    Bind {
        /// Which port: what the hint names.
        port: Listener,
        address: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Serve(#[from] crate::server::ServeError),
    #[error("{0}")]
    Metrics(String),
    #[error("the server task failed: {0}")]
    Crashed(String),
    #[error("interrupted before the service was ready")]
    Interrupted,
}

/// The ports a service listens on, by the flag that sets each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    Grpc,
    Mcp,
    Dashboard,
    Metrics,
}

impl Listener {
    /// The flag and variable that choose its address.
    fn flag(self) -> &'static str {
        match self {
            Listener::Grpc => "--listen (TASKSTORE_LISTEN)",
            Listener::Mcp => "--mcp-listen (TASKSTORE_MCP_LISTEN)",
            Listener::Dashboard => "--dashboard-listen (TASKSTORE_DASHBOARD_LISTEN)",
            Listener::Metrics => "--metrics-listen (TASKSTORE_METRICS_LISTEN)",
        }
    }
}

/// What to do about a listener that could not be bound.
fn bind_hint(err: &std::io::Error, port: &Listener) -> String {
    match err.kind() {
        std::io::ErrorKind::AddrInUse => format!(
            "; another process (perhaps another taskstore) listens there: stop it, or choose another address with {}",
            port.flag()
        ),
        kind => bind_hint_of(kind).to_owned(),
    }
}

fn bind_hint_of(kind: std::io::ErrorKind) -> &'static str {
    match kind {
        std::io::ErrorKind::AddrNotAvailable => {
            "; no network interface of this machine has that address"
        }
        std::io::ErrorKind::PermissionDenied => {
            "; ports below 1024 need privileges: use a higher one"
        }
        _ => "",
    }
}
