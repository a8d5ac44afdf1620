//! The flags of the MCP endpoint (`--mcp-*`), shared by `serve`, `dev` and
//! `mcp`: off by default for `serve`, on (loopback) for `dev` and `mcp`.

use std::str::FromStr;

use clap::Args;

use super::Mode;
use super::values::ListenAddress;
use crate::auth::AuthMethod;
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
        auth: &[AuthMethod],
    ) -> Result<Option<McpSettings>, String> {
        let authenticated = auth != [AuthMethod::None];
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
        // The protected-resource metadata names the resource tokens are for;
        // taken from a request's Host, anyone could make it name theirs.
        if auth.contains(&AuthMethod::Jwt) && self.mcp_resource_url.is_none() {
            return Err(
                "--auth jwt with the MCP endpoint needs --mcp-resource-url (TASKSTORE_MCP_RESOURCE_URL): the URL clients reach /mcp at, which the OAuth protected-resource metadata names (e.g. https://tasks.example.com/mcp)".to_owned(),
            );
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(listen: &str, resource: Option<&str>) -> McpArgs {
        McpArgs {
            mcp_listen: Some(listen.parse().expect("listen")),
            mcp_allowed_origins: Vec::new(),
            mcp_resource_url: resource.map(str::to_owned),
            mcp_max_connections: 8,
        }
    }

    fn settings(args: &McpArgs, auth: &[AuthMethod]) -> Result<Option<McpSettings>, String> {
        args.settings(Mode::Serve, 1024, std::time::Duration::from_secs(1), auth)
    }

    #[test]
    fn jwt_needs_the_resource_url_rather_than_trusting_a_host_header() {
        let bare = args("127.0.0.1:0", None);
        let refused = settings(&bare, &[AuthMethod::Jwt]).expect_err("refused");
        assert!(refused.contains("--mcp-resource-url"), "{refused}");
        assert!(settings(&bare, &[AuthMethod::ApiKeys]).is_ok());
        let named = args("127.0.0.1:0", Some("https://tasks.example.com/mcp"));
        let on = settings(&named, &[AuthMethod::ApiKeys, AuthMethod::Jwt])
            .expect("settings")
            .expect("on");
        assert_eq!(
            on.resource_url.as_deref(),
            Some("https://tasks.example.com/mcp")
        );
        // Off, nothing is served, so nothing is needed.
        assert_eq!(settings(&args("off", None), &[AuthMethod::Jwt]), Ok(None));
    }
}
