//! The flags of the MCP endpoint (`--mcp-*`), shared by `serve`, `dev` and
//! `mcp`: off by default for `serve`, on (loopback) for `dev` and `mcp`.

use std::str::FromStr;

use clap::Args;

use super::Mode;
use super::values::ListenAddress;
use crate::mcp::McpSettings;

/// Where `dev` and `mcp` serve MCP unless told otherwise: beside gRPC's
/// 50051.
pub const DEFAULT_MCP_LISTEN: &str = "127.0.0.1:50052";

#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// Serve MCP (Streamable HTTP, `/mcp`) on HOST:PORT, or `off`. Default:
    /// off for `serve`; 127.0.0.1:50052 for `dev` and `mcp`.
    #[arg(long, env = "TASKSTORE_MCP_LISTEN", value_name = "HOST:PORT|off")]
    pub mcp_listen: Option<McpListen>,
    /// Browser origins allowed to call /mcp besides loopback ones
    /// (comma-separated, exact, e.g. https://app.example.com); requests
    /// with any other Origin header are refused.
    #[arg(long, env = "TASKSTORE_MCP_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub mcp_allowed_origins: Vec<String>,
    /// The URL clients reach /mcp at (e.g. https://mcp.example.com/mcp),
    /// named in the OAuth protected-resource metadata served with --auth jwt.
    #[arg(long, env = "TASKSTORE_MCP_RESOURCE_URL")]
    pub mcp_resource_url: Option<String>,
    /// Connections to /mcp served at once; more are closed when accepted.
    /// (Each must send its request headers within 10 s.)
    #[arg(long, env = "TASKSTORE_MCP_MAX_CONNECTIONS", default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..))]
    pub mcp_max_connections: u32,
}

/// `--mcp-listen`: an address, or `off`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpListen {
    On(ListenAddress),
    Off,
}

impl FromStr for McpListen {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        if raw.eq_ignore_ascii_case("off") {
            Ok(McpListen::Off)
        } else {
            raw.parse().map(McpListen::On)
        }
    }
}

impl McpArgs {
    /// The endpoint's settings, or `None` when it is off. `max_body_bytes`
    /// is the gRPC message limit (the same requests, over HTTP);
    /// `authenticated`: whether callers authenticate (without, only
    /// loopback may be served, as for gRPC).
    pub fn settings(
        &self,
        mode: Mode,
        max_body_bytes: usize,
        max_wait: std::time::Duration,
        authenticated: bool,
    ) -> Result<Option<McpSettings>, String> {
        let listen = match (&self.mcp_listen, mode) {
            (Some(McpListen::Off), _) | (None, Mode::Serve) => return Ok(None),
            (Some(McpListen::On(listen)), _) => listen.clone(),
            (None, Mode::Dev | Mode::Mcp) => DEFAULT_MCP_LISTEN.parse()?,
        };
        if mode == Mode::Dev && !authenticated && !listen.is_loopback() {
            return Err(format!(
                "dev runs without authentication, so it serves MCP on loopback only, not {listen}: use 127.0.0.1 or localhost"
            ));
        }
        if let Some(url) = &self.mcp_resource_url
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            return Err(format!("--mcp-resource-url {url:?} must be an http(s) URL"));
        }
        Ok(Some(McpSettings {
            allowed_origins: self.mcp_allowed_origins.clone(),
            max_body_bytes,
            max_wait,
            resource_url: self.mcp_resource_url.clone(),
            max_connections: usize::try_from(self.mcp_max_connections).unwrap_or(usize::MAX),
            ..McpSettings::on(listen.to_string())
        }))
    }
}
