//! Logging: structured `tracing` events to stderr, as text or JSON.

use tracing_subscriber::EnvFilter;

/// lapin logs every job the broker returns as a warning with a full dump;
/// a returned job is expected here (no worker serves its tool yet) and is
/// handled and reported by the relay.
const QUIET_RETURNS: &str = "lapin::returned_messages=error";

/// The log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Installs the global subscriber. `filter` takes `RUST_LOG` syntax
/// (e.g. `info` or `taskstore=debug,sqlx=warn`).
pub fn init(format: LogFormat, filter: &str) -> Result<(), String> {
    let filter = EnvFilter::try_new(filter)
        .map_err(|err| format!("invalid log filter {filter:?}: {err}"))?
        .add_directive(QUIET_RETURNS.parse().map_err(|err| format!("{err}"))?);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
    result.map_err(|err| format!("could not install the logger: {err}"))
}
