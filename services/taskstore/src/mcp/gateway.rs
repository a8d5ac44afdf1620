//! What every MCP request shares: the store, the registry, credentials,
//! limits, and the gateway's settings.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::in_flight::InFlight;
use crate::auth::Authenticator;
use crate::domain::InputLimits;
use crate::domain::{FleetPolicy, Sealer};
use crate::edge::Admissions;
use crate::store::TaskStore;
use crate::store::operations::OperationsStore;

/// The extension id of SEP-2663 tasks, in capabilities of both sides.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// What the gateway is configured with (`--mcp-*` flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpSettings {
    /// HOST:PORT to serve `/mcp` on.
    pub listen: String,
    /// Browser origins allowed besides loopback ones (`http://localhost:*`
    /// and the like are always allowed); a request with any other `Origin`
    /// is refused (DNS rebinding protection).
    pub allowed_origins: Vec<String>,
    /// The largest POST body, in bytes.
    pub max_body_bytes: usize,
    /// The longest a synchronous `tools/call` or a `tasks/result` waits in
    /// one HTTP request.
    pub max_wait: Duration,
    /// The URL clients reach `/mcp` at, for the OAuth protected-resource
    /// metadata (served when JWT authentication is on).
    pub resource_url: Option<String>,
    /// How long a connection may take to send a request's headers (and,
    /// on the dashboard, a form's body).
    pub header_read_timeout: Duration,
    /// How long a connection may stay open with no request in flight.
    pub idle_timeout: Duration,
    /// Connections served at once; more are closed when accepted.
    pub max_connections: usize,
}

impl McpSettings {
    /// The settings of a gateway on `listen` with the defaults.
    pub fn on(listen: impl Into<String>) -> Self {
        Self {
            listen: listen.into(),
            allowed_origins: Vec::new(),
            max_body_bytes: 4 * 1024 * 1024,
            max_wait: Duration::from_secs(600),
            resource_url: None,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 4096,
        }
    }
}

/// Everything a request needs, shared by all requests.
pub(crate) struct Gateway {
    pub store: Arc<dyn TaskStore>,
    pub operations: Arc<dyn OperationsStore>,
    pub authenticator: Authenticator,
    pub limits: InputLimits,
    pub admissions: Arc<Admissions>,
    pub fleet: FleetPolicy,
    pub settings: McpSettings,
    /// The OAuth authorization server (the JWT issuer), when tokens of one
    /// are accepted.
    pub authorization_server: Option<String>,
    /// Ends waiting calls when the gateway stops.
    pub shutdown: CancellationToken,
    /// This replica's synchronous tool calls.
    pub in_flight: InFlight,
    /// This replica's `tasks/result` streams, which carry their task's
    /// changes instead of the session's GET stream.
    pub result_streams: super::result_streams::ResultStreams,
    /// The tools served now, read at most once a second.
    pub served: crate::edge::ToolCatalog,
    /// Seals what clients carry back to any replica: input request ids,
    /// request states.
    pub sealer: Sealer,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// What a gateway is built from.
pub struct GatewayParts {
    pub store: Arc<dyn TaskStore>,
    pub operations: Arc<dyn OperationsStore>,
    pub authenticator: Authenticator,
    pub limits: InputLimits,
    pub admissions: Arc<Admissions>,
    pub authorization_server: Option<String>,
}

impl std::fmt::Debug for GatewayParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayParts")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    pub(crate) fn new(
        parts: GatewayParts,
        settings: McpSettings,
        shutdown: CancellationToken,
    ) -> Self {
        let sealer = Sealer::new(parts.operations.shared_key("mcp"));
        Self {
            sealer,
            store: parts.store,
            operations: parts.operations,
            authenticator: parts.authenticator,
            limits: parts.limits,
            admissions: parts.admissions,
            fleet: FleetPolicy::default(),
            settings,
            authorization_server: parts.authorization_server,
            shutdown,
            in_flight: InFlight::default(),
            result_streams: Default::default(),
            served: crate::edge::ToolCatalog::default(),
        }
    }
}
