//! Telemetry for every mcp-taskstore binary, set up the same way:
//!
//! - [`logs`]: structured `tracing` events on stderr, text or JSON;
//! - [`traces`]: OpenTelemetry spans over OTLP, when the standard `OTEL_*`
//!   variables ask for them (off, at no cost, otherwise);
//! - [`propagation`]: W3C `traceparent` in and out of gRPC metadata, AMQP
//!   headers and stored tasks, so one trace follows a task across
//!   processes and restarts;
//! - [`grpc`]: client spans for outgoing RPCs, and the response-body
//!   observer both sides use to see how an RPC ended;
//! - [`metrics`]: a Prometheus `/metrics` endpoint on a port of its own.

pub mod grpc;
pub mod logs;
pub mod metrics;
pub mod propagation;
pub mod traces;

pub use logs::LogFormat;

/// What [`Telemetry::init`] installed; [`Telemetry::shutdown`] flushes it.
#[derive(Debug)]
pub struct Telemetry {
    tracer: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Telemetry {
    /// Installs the global subscriber: logs in `format`, filtered by
    /// `filter` (RUST_LOG syntax) plus `quiet` directives, and, when the
    /// `OTEL_*` variables ask for it, spans exported over OTLP as
    /// `service_name` (unless `OTEL_SERVICE_NAME` says otherwise).
    pub fn init(
        service_name: &'static str,
        format: LogFormat,
        filter: &str,
        quiet: &[&str],
    ) -> Result<Self, String> {
        let tracer = traces::provider(service_name)?;
        logs::install(format, filter, quiet, tracer.as_ref())?;
        if tracer.is_some() {
            tracing::info!("exporting traces over OTLP");
        }
        Ok(Self { tracer })
    }

    /// Whether spans are exported.
    pub fn traces_enabled(&self) -> bool {
        self.tracer.is_some()
    }

    /// Exports what is still buffered; call before the process exits.
    pub fn shutdown(self) {
        if let Some(tracer) = self.tracer
            && let Err(err) = tracer.shutdown()
        {
            tracing::warn!(error = %err, "could not flush the last spans");
        }
    }
}
