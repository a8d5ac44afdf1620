//! The flags of the web dashboard (`--dashboard-*`), shared by `serve`,
//! `dev` and `mcp`: off by default for `serve` and `mcp`, on (loopback)
//! for `dev`.

use clap::Args;

use super::Mode;
use super::mcp::McpListen;
use crate::dashboard::{ClientSecret, DashboardSettings, OidcSettings};

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
    /// Single sign-on with the issuer of --auth jwt: the client id the
    /// issuer registered the dashboard under (authorization code flow with
    /// PKCE). Needs --dashboard-public-url.
    #[arg(long, env = "TASKSTORE_DASHBOARD_OIDC_CLIENT_ID")]
    pub dashboard_oidc_client_id: Option<String>,
    /// The client's secret, for an issuer that registered the dashboard as
    /// a confidential client (sent with HTTP Basic to the token endpoint).
    /// Prefer the environment variable.
    #[arg(
        long,
        env = "TASKSTORE_DASHBOARD_OIDC_CLIENT_SECRET",
        hide_env_values = true
    )]
    pub dashboard_oidc_client_secret: Option<String>,
    /// The scopes single sign-on asks for, space-separated.
    #[arg(
        long,
        env = "TASKSTORE_DASHBOARD_OIDC_SCOPES",
        default_value = "openid"
    )]
    pub dashboard_oidc_scopes: String,
    /// The dashboard's address as browsers reach it, base path included
    /// (e.g. https://ops.example.com/tasks): single sign-on's redirect URI
    /// is this plus /login/oidc/callback.
    #[arg(long, env = "TASKSTORE_DASHBOARD_PUBLIC_URL")]
    pub dashboard_public_url: Option<String>,
}

impl DashboardArgs {
    /// The dashboard's settings, or `None` when it is off. `authenticated`:
    /// without authentication, only loopback may be served.
    pub fn settings(
        &self,
        mode: Mode,
        authenticated: bool,
        issuer_trusted: bool,
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
            oidc: self.oidc(issuer_trusted)?,
            ..DashboardSettings::on(listen.to_string())
        }))
    }

    /// Single sign-on's settings, when a client id is given.
    fn oidc(&self, issuer_trusted: bool) -> Result<Option<OidcSettings>, String> {
        let Some(client_id) = &self.dashboard_oidc_client_id else {
            return Ok(None);
        };
        if !issuer_trusted {
            return Err(
                "--dashboard-oidc-client-id needs --auth jwt (the issuer to log in with)"
                    .to_owned(),
            );
        }
        let public_url = self.dashboard_public_url.as_deref().ok_or(
            "--dashboard-oidc-client-id needs --dashboard-public-url (the redirect URI is made from it)",
        )?;
        if client_id.is_empty() || client_id.len() > 256 {
            return Err("--dashboard-oidc-client-id must be 1 to 256 characters".to_owned());
        }
        let scopes = self
            .dashboard_oidc_scopes
            .split_whitespace()
            .collect::<Vec<_>>();
        if !scopes.contains(&"openid") {
            return Err("--dashboard-oidc-scopes must include openid".to_owned());
        }
        Ok(Some(OidcSettings {
            client_id: client_id.clone(),
            client_secret: self
                .dashboard_oidc_client_secret
                .clone()
                .map(ClientSecret::new),
            public_url: OidcSettings::check_url("--dashboard-public-url", public_url)?,
            scopes: scopes.join(" "),
        }))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        dashboard: DashboardArgs,
    }

    fn oidc(args: &[&str], issuer_trusted: bool) -> Result<Option<OidcSettings>, String> {
        let mut argv = vec!["taskstore", "--dashboard-listen", "127.0.0.1:0"];
        argv.extend_from_slice(args);
        let flags = Flags::try_parse_from(argv).map_err(|err| err.to_string())?;
        flags
            .dashboard
            .settings(Mode::Serve, true, issuer_trusted)
            .map(|settings| settings.and_then(|settings| settings.oidc))
    }

    #[test]
    fn single_sign_on_needs_the_issuer_a_public_url_and_the_openid_scope() {
        let client = ["--dashboard-oidc-client-id", "dashboard"];
        let public = ["--dashboard-public-url", "https://ops.example.com/tasks/"];
        let both = [client, public].concat();
        let settings = oidc(&both, true).expect("valid").expect("on");
        assert_eq!(settings.public_url, "https://ops.example.com/tasks");
        assert_eq!(settings.scopes, "openid");
        assert_eq!(oidc(&[], true), Ok(None));
        assert!(oidc(&both, false).is_err_and(|why| why.contains("--auth jwt")));
        assert!(oidc(&client, true).is_err_and(|why| why.contains("--dashboard-public-url")));
        let plain_http = [
            &client[..],
            &["--dashboard-public-url", "http://ops.example.com"],
        ]
        .concat();
        assert!(oidc(&plain_http, true).is_err());
        let no_openid = [&both[..], &["--dashboard-oidc-scopes", "profile"]].concat();
        assert!(oidc(&no_openid, true).is_err_and(|why| why.contains("openid")));
    }
}
