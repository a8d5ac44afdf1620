//! W3C trace context (`traceparent`) in and out of whatever carries it:
//! gRPC metadata (HTTP/2 headers), AMQP message headers, a task's stored
//! row. With traces off, a span has no trace context and nothing is
//! written; an incoming `traceparent` can still be passed on as it came.

use std::collections::HashMap;

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The header (and field) name of the W3C trace context.
pub const TRACEPARENT: &str = "traceparent";

/// The longest `traceparent` accepted: version 00 is exactly 55 characters;
/// later versions may append fields.
const MAX_TRACEPARENT_LEN: usize = 256;

/// Whether `raw` has the shape of a `traceparent` (`vv-<32 hex>-<16 hex>-ff`
/// and, for later versions, more): checked before it is stored or passed on.
pub fn is_traceparent(raw: &str) -> bool {
    let parts: Vec<&str> = raw.split('-').collect();
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    raw.len() <= MAX_TRACEPARENT_LEN
        && parts.len() >= 4
        && hex(parts[0], 2)
        && hex(parts[1], 32)
        && hex(parts[2], 16)
        && hex(parts[3], 2)
        && parts[1].bytes().any(|b| b != b'0')
        && parts[2].bytes().any(|b| b != b'0')
}

/// The `traceparent` of `span`, when it belongs to a trace.
pub fn traceparent_of(span: &tracing::Span) -> Option<String> {
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// The `traceparent` of the current span, when it belongs to a trace.
pub fn current_traceparent() -> Option<String> {
    traceparent_of(&tracing::Span::current())
}

/// The trace id of `span`, in hex, when it belongs to a trace (for logs).
pub fn trace_id_of(span: &tracing::Span) -> Option<String> {
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}

/// Makes `traceparent` the parent of `span`; a malformed one is ignored.
pub fn set_parent(span: &tracing::Span, traceparent: &str) {
    if !is_traceparent(traceparent) {
        return;
    }
    let carrier = HashMap::from([(TRACEPARENT.to_owned(), traceparent.to_owned())]);
    let context = TraceContextPropagator::new().extract_with_context(&Context::new(), &carrier);
    // Without an OpenTelemetry layer there is nothing to attach to.
    let _ = span.set_parent(context);
}

/// Reads `traceparent` from HTTP headers.
#[derive(Debug)]
pub struct HeaderExtractor<'a>(pub &'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Writes `traceparent` into HTTP headers.
#[derive(Debug)]
pub struct HeaderInjector<'a>(pub &'a mut http::HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// The `traceparent` in HTTP headers, when well-formed.
pub fn traceparent_in(headers: &http::HeaderMap) -> Option<String> {
    HeaderExtractor(headers)
        .get(TRACEPARENT)
        .filter(|raw| is_traceparent(raw))
        .map(str::to_owned)
}

/// Writes `span`'s trace context into `headers`.
pub fn inject_into(span: &tracing::Span, headers: &mut http::HeaderMap) {
    let context = span.context();
    if context.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&context, &mut HeaderInjector(headers));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_are_checked_for_shape() {
        assert!(is_traceparent(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        ));
        assert!(is_traceparent(
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"
        ));
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(!is_traceparent(bad), "{bad}");
        }
        let long = format!(
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-{}",
            "a".repeat(300)
        );
        assert!(!is_traceparent(&long));
    }

    #[test]
    fn without_a_tracer_nothing_is_written() {
        let span = tracing::info_span!("no tracer");
        assert_eq!(traceparent_of(&span), None);
        let mut headers = http::HeaderMap::new();
        inject_into(&span, &mut headers);
        assert!(headers.is_empty());
    }
}
