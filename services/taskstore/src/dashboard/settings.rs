//! What the dashboard is configured with (`--dashboard-*` flags).

use std::time::Duration;

use crate::auth::oidc::OidcSettings;

/// What a trace link template names the trace id by.
pub const TRACE_ID: &str = "{trace_id}";

/// Where and how the dashboard is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DashboardSettings {
    /// HOST:PORT to serve it on: its own port, so that long-lived page
    /// streams never take the MCP port's connections.
    pub listen: String,
    /// The path it is served under behind a reverse proxy (`/ops/tasks`),
    /// without a trailing slash; empty at the root.
    pub base_path: String,
    /// No action at all, whatever the credentials allow.
    pub read_only: bool,
    /// Connections served at once; more are closed when accepted.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers (and,
    /// on the dashboard, a form's body).
    pub header_read_timeout: Duration,
    /// How long a connection may stay open with no request in flight.
    pub idle_timeout: Duration,
    /// Whether the session cookie is `Secure` (sent over HTTPS only).
    /// Off only for a loopback port without TLS in front (`dev`).
    pub secure_cookie: bool,
    /// How long a login lasts (the key is checked on every request too).
    pub session_lifetime: Duration,
    /// Where a task's trace is shown: a URL with `{trace_id}` in it (a
    /// Jaeger, Tempo or Honeycomb link), or none.
    pub trace_url: Option<String>,
    /// Single sign-on with the issuer of `--auth jwt`, when configured.
    pub oidc: Option<OidcSettings>,
}

impl DashboardSettings {
    /// The settings of a dashboard on `listen` with the defaults.
    pub fn on(listen: impl Into<String>) -> Self {
        Self {
            listen: listen.into(),
            base_path: String::new(),
            read_only: false,
            max_connections: 256,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            secure_cookie: true,
            session_lifetime: Duration::from_secs(12 * 3600),
            trace_url: None,
            oidc: None,
        }
    }

    /// A trace link template checked: an http(s) URL naming `{trace_id}`.
    pub fn parse_trace_url(raw: &str) -> Result<String, String> {
        let is_http = raw.starts_with("https://") || raw.starts_with("http://");
        if is_http && raw.contains(TRACE_ID) && !raw.contains(['"', '<', '>', ' ']) {
            Ok(raw.to_owned())
        } else {
            Err(format!(
                "--dashboard-trace-url {raw:?} must be an http(s) URL containing {TRACE_ID}, e.g. https://jaeger.example.com/trace/{TRACE_ID}"
            ))
        }
    }

    /// The link to the trace `trace_id` (32 hex digits, from a checked
    /// `traceparent`), when a template is configured.
    pub fn trace_link(&self, trace_id: &str) -> Option<String> {
        self.trace_url
            .as_ref()
            .map(|template| template.replace(TRACE_ID, trace_id))
    }

    /// `base_path` checked and normalised: empty, or `/` followed by
    /// segments of URL-safe characters, no trailing slash.
    pub fn parse_base_path(raw: &str) -> Result<String, String> {
        let trimmed = raw.trim_end_matches('/');
        if trimmed.is_empty() {
            return Ok(String::new());
        }
        let well_formed = trimmed.starts_with('/')
            && !trimmed.contains("//")
            && trimmed[1..].bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/')
            })
            && !trimmed
                .split('/')
                .any(|segment| segment == "." || segment == "..");
        if well_formed {
            Ok(trimmed.to_owned())
        } else {
            Err(format!(
                "--dashboard-base-path {raw:?} must be a path like /ops/tasks (letters, digits, - _ . ~)"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_paths_are_normalised_or_refused() {
        assert_eq!(DashboardSettings::parse_base_path(""), Ok(String::new()));
        assert_eq!(DashboardSettings::parse_base_path("/"), Ok(String::new()));
        assert_eq!(
            DashboardSettings::parse_base_path("/ops/tasks/"),
            Ok("/ops/tasks".to_owned())
        );
        for bad in ["ops", "/a//b", "/a/../b", "/a b", "/a?x", "/<script>"] {
            assert!(DashboardSettings::parse_base_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn trace_links_need_an_http_url_naming_the_trace() {
        let template = "https://jaeger.example.com/trace/{trace_id}";
        assert_eq!(
            DashboardSettings::parse_trace_url(template),
            Ok(template.to_owned())
        );
        for bad in [
            "https://x.example/trace",
            "javascript:{trace_id}",
            "https://x/\"{trace_id}",
        ] {
            assert!(DashboardSettings::parse_trace_url(bad).is_err(), "{bad}");
        }
        let settings = DashboardSettings {
            trace_url: Some(template.to_owned()),
            ..DashboardSettings::on("127.0.0.1:0")
        };
        assert_eq!(
            settings
                .trace_link("4bf92f3577b34da6a3ce929d0e0e4736")
                .as_deref(),
            Some("https://jaeger.example.com/trace/4bf92f3577b34da6a3ce929d0e0e4736")
        );
    }
}
