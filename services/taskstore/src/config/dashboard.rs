//! The flags of the web dashboard (`--dashboard-*`), shared by `serve`,
//! `dev` and `mcp`: off by default for `serve` and `mcp`, on (loopback)
//! for `dev`.

use clap::Args;

use super::Mode;
use super::mcp::McpListen;
use crate::dashboard::DashboardSettings;

/// Where `dev` serves the dashboard unless told otherwise: beside gRPC's
/// 50051 and MCP's 50052.
pub const DEFAULT_DASHBOARD_LISTEN: &str = "127.0.0.1:50053";

#[derive(Debug, Clone, Args)]
pub struct DashboardArgs {
    /// Serve the web dashboard on HOST:PORT (its own port), or `off`.
    /// Default: 127.0.0.1:50053 for `dev`; off for `serve` and `mcp`.
    #[arg(long, env = "TASKSTORE_DASHBOARD_LISTEN", value_name = "HOST:PORT|off")]
    pub dashboard_listen: Option<McpListen>,
    /// The path the dashboard is served under behind a reverse proxy
    /// (e.g. /ops/tasks).
    #[arg(long, env = "TASKSTORE_DASHBOARD_BASE_PATH", default_value = "")]
    pub dashboard_base_path: String,
    /// Show everything, allow no action (cancel, answer, run, delete),
    /// whatever the credentials allow.
    #[arg(long, env = "TASKSTORE_DASHBOARD_READ_ONLY")]
    pub dashboard_read_only: bool,
    /// Connections to the dashboard served at once (each open page keeps
    /// one for its live updates); more are closed when accepted.
    #[arg(long, env = "TASKSTORE_DASHBOARD_MAX_CONNECTIONS", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub dashboard_max_connections: u32,
    /// Send the session cookie over plain HTTP too (no `Secure` flag): only
    /// for a dashboard reached without TLS on another host than loopback.
    #[arg(long, env = "TASKSTORE_DASHBOARD_INSECURE_COOKIE")]
    pub dashboard_insecure_cookie: bool,
    /// A link to a task's trace, with {trace_id} where the id goes (e.g.
    /// https://jaeger.example.com/trace/{trace_id}).
    #[arg(long, env = "TASKSTORE_DASHBOARD_TRACE_URL")]
    pub dashboard_trace_url: Option<String>,
}

impl DashboardArgs {
    /// The dashboard's settings, or `None` when it is off. `authenticated`:
    /// without authentication, only loopback may be served.
    pub fn settings(
        &self,
        mode: Mode,
        authenticated: bool,
    ) -> Result<Option<DashboardSettings>, String> {
        let listen = match (&self.dashboard_listen, mode) {
            (Some(McpListen::Off), _) | (None, Mode::Serve | Mode::Mcp) => return Ok(None),
            (Some(McpListen::On(listen)), _) => listen.clone(),
            (None, Mode::Dev) => DEFAULT_DASHBOARD_LISTEN.parse()?,
        };
        if !authenticated && !listen.is_loopback() {
            return Err(format!(
                "without authentication the dashboard is served on loopback only, not {listen}: use 127.0.0.1 or localhost, or --auth api-keys"
            ));
        }
        Ok(Some(DashboardSettings {
            base_path: DashboardSettings::parse_base_path(&self.dashboard_base_path)?,
            read_only: self.dashboard_read_only,
            max_connections: usize::try_from(self.dashboard_max_connections).unwrap_or(usize::MAX),
            // Browsers keep Secure cookies from http://localhost and
            // 127.0.0.1 too; elsewhere plain HTTP needs the flag.
            secure_cookie: !self.dashboard_insecure_cookie,
            trace_url: self
                .dashboard_trace_url
                .as_deref()
                .map(DashboardSettings::parse_trace_url)
                .transpose()?,
            ..DashboardSettings::on(listen.to_string())
        }))
    }
}
