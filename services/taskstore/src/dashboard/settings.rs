//! What the dashboard is configured with (`--dashboard-*` flags).

use std::time::Duration;

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
    /// How long a connection may take to send a request's headers.
    pub header_read_timeout: Duration,
    /// Whether the session cookie is `Secure` (sent over HTTPS only).
    /// Off only for a loopback port without TLS in front (`dev`).
    pub secure_cookie: bool,
    /// How long a login lasts (the key is checked on every request too).
    pub session_lifetime: Duration,
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
            secure_cookie: true,
            session_lifetime: Duration::from_secs(12 * 3600),
        }
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
}
