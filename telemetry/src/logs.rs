//! Log lines: structured `tracing` events to stderr, as text (coloured only
//! on a terminal, never with NO_COLOR) or JSON (one object per line, with
//! the fields of the spans it happened in, such as `task_id` and
//! `trace_id`).

use std::io::IsTerminal;

use opentelemetry::trace::TracerProvider as _;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The spans exported as traces, whatever the log level: ours and the
/// libraries' at info and above.
const SPAN_FILTER: &str = "info";

/// Libraries quietened in every binary unless the filter names them:
/// lapin logs each failed connection attempt as several ERROR lines, while
/// our relay and workers say once per outage what failed, and why, in
/// words an operator acts on.
const QUIET_EVERYWHERE: &[&str] = &["lapin=off"];

/// The log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Colour only for a person at a terminal, and never when NO_COLOR is set
/// (https://no-color.org).
pub fn colour_on_stderr() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

pub(crate) fn install(
    format: LogFormat,
    filter: &str,
    quiet: &[&str],
    tracer: Option<&opentelemetry_sdk::trace::SdkTracerProvider>,
) -> Result<(), String> {
    let filter_of = |base: &str| -> Result<EnvFilter, String> {
        let mut filter = EnvFilter::try_new(base)
            .map_err(|err| format!("invalid log filter {base:?}: {err}"))?;
        for directive in quiet.iter().chain(QUIET_EVERYWHERE) {
            // A target the user named in the filter is theirs to set.
            let target = directive.split('=').next().unwrap_or(directive);
            if base.contains(target) {
                continue;
            }
            filter = filter.add_directive(
                directive
                    .parse()
                    .map_err(|err| format!("invalid log directive {directive:?}: {err}"))?,
            );
        }
        Ok(filter)
    };
    // Each layer has its own filter: a quieter log level must not turn off
    // the spans that are exported.
    let spans = match tracer {
        Some(provider) => Some(
            tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("mcp-taskstore"))
                .with_filter(filter_of(SPAN_FILTER)?),
        ),
        None => None,
    };
    let lines = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(colour_on_stderr())
            .with_writer(std::io::stderr)
            .boxed(),
        // One flat object per line: the fields of the event and of every
        // span it happened in (`task_id`, `trace_id`, the RPC, …) side by
        // side, where a log pipeline indexes them without knowing the spans.
        // Events do not repeat a field their span has (duplicate keys).
        LogFormat::Json => json_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .flatten_event(true)
            .flatten_span_list_on_top_level(true)
            .with_current_span(false)
            .with_span_list(false)
            .boxed(),
    };
    tracing_subscriber::registry()
        .with(spans)
        .with(lines.with_filter(filter_of(filter)?))
        .try_init()
        .map_err(|err| format!("could not install the logger: {err}"))
}
