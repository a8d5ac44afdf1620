//! How durations are written on the command line, for every flag that
//! takes one (a leaf module: the flags of `serve`, the client commands and
//! the load generator all use it).

use std::time::Duration;

/// `30s`, `5m`, `1h 30m`, `7d`, `250ms`.
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    humantime::parse_duration(raw).map_err(|err| format!("{raw:?}: {err}"))
}
