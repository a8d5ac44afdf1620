//! OpenTelemetry traces over OTLP, configured by the standard variables:
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
//! turns them on; `OTEL_EXPORTER_OTLP_PROTOCOL` picks `grpc` or
//! `http/protobuf` (the default, as the specification says);
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`
//! and `OTEL_TRACES_SAMPLER_ARG` are read by the SDK; `OTEL_SDK_DISABLED=true`
//! or `OTEL_TRACES_EXPORTER=none` turn them off. Without any of them nothing
//! is set up: no exporter, no span is recorded for export.

use opentelemetry_otlp::{SpanExporter, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;

fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

/// Whether the environment asks for traces.
pub fn enabled() -> bool {
    let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
    let configured = var("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
        || var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
        || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("otlp"));
    configured && !disabled
}

/// The tracer provider the environment asks for, if any.
pub(crate) fn provider(service_name: &'static str) -> Result<Option<SdkTracerProvider>, String> {
    if !enabled() {
        return Ok(None);
    }
    let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_else(|| "http/protobuf".to_owned());
    let exporter = match protocol.as_str() {
        "grpc" => SpanExporter::builder().with_tonic().build(),
        "http/protobuf" => SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .build(),
        other => {
            return Err(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL={other:?} is not supported: use grpc or http/protobuf"
            ));
        }
    }
    .map_err(|err| format!("could not set up the OTLP trace exporter: {err}"))?;
    let mut resource = Resource::builder();
    if var("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(service_name);
    }
    resource = resource.with_attributes([opentelemetry::KeyValue::new(
        "service.version",
        env!("CARGO_PKG_VERSION"),
    )]);
    Ok(Some(
        SdkTracerProvider::builder()
            .with_resource(resource.build())
            .with_batch_exporter(exporter)
            .build(),
    ))
}
