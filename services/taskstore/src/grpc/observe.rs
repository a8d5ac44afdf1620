//! Every RPC the server answers, observed once, in one tower layer: a span
//! (a child of the caller's `traceparent`, named and described as the
//! OpenTelemetry conventions for gRPC say) that the handler's log lines and
//! the store's work happen in, the `taskstore_rpc_*` metrics, and one
//! access log line naming the caller (`key:<id>`, refused or not), all
//! completed when the response ends (for a stream, when the stream does).

use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use taskstore_telemetry::grpc::{
    ObservedBody, ObservedFuture, code_name, is_server_error, observe_response, record_end,
    rpc_name,
};
use taskstore_telemetry::propagation::{set_parent, trace_id_of, traceparent_in};
use tower::{Layer, Service};
use tracing::Instrument;

/// Who called, as the authentication layer (inside this one) found out:
/// the caller's subject, or the credential it refused. Never a secret.
#[derive(Debug, Clone, Default)]
pub struct CallerSlot(Arc<OnceLock<String>>);

impl CallerSlot {
    /// Records who called (the first word wins).
    pub fn set(&self, who: impl Into<String>) {
        let _ = self.0.set(who.into());
    }

    fn get(&self) -> &str {
        self.0.get().map_or("-", String::as_str)
    }
}

/// The caller's `traceparent`, as it came (passed on with a task even when
/// this service exports no traces itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingTraceparent(pub String);

/// The layer: `Server::builder().layer(ObserveRpcs)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ObserveRpcs;

impl<S> Layer<S> for ObserveRpcs {
    type Service = Observed<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Observed { inner }
    }
}

#[derive(Debug, Clone)]
pub struct Observed<S> {
    inner: S,
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for Observed<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: Send + 'static,
{
    type Response = http::Response<ObservedBody<ResBody>>;
    type Error = S::Error;
    type Future = ObservedFuture<ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<ReqBody>) -> Self::Future {
        let (service, method) = rpc_name(request.uri().path());
        let (service, method) = (service.to_owned(), method.to_owned());
        let span = rpc_span(&service, &method);
        if let Some(parent) = traceparent_in(request.headers()) {
            set_parent(&span, &parent);
            request.extensions_mut().insert(IncomingTraceparent(parent));
        }
        if let Some(trace_id) = trace_id_of(&span) {
            span.record("trace_id", trace_id);
        }
        let caller = CallerSlot::default();
        request.extensions_mut().insert(caller.clone());
        let started = Instant::now();
        let call = self.inner.call(request).instrument(span.clone());
        observe_response(
            call,
            Box::new(move |code| {
                // Before the span records its end: the line carries the
                // code once, as its own field.
                log_access(&span, &service, &method, caller.get(), code, started);
                record_end(&span, code, is_server_error(code));
                crate::metrics::rpc_ended(&service, &method, code_name(code), started);
            }),
        )
    }
}

/// The access log line of one RPC, in its span (which names the method
/// and carries the trace id): who called, how it ended, how long it took.
/// Routine RPCs log at debug, as their spans do.
fn log_access(
    span: &tracing::Span,
    service: &str,
    method: &str,
    caller: &str,
    code: i32,
    started: Instant,
) {
    let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    let code = code_name(code);
    if is_routine(service, method) {
        tracing::debug!(target: "taskstore::access", parent: span, caller, code, duration_ms, "rpc");
    } else {
        tracing::info!(target: "taskstore::access", parent: span, caller, code, duration_ms, "rpc");
    }
}

/// RPCs that run all the time and say nothing about tasks: health checks,
/// reflection and worker heartbeats. Their spans are debug-level, so that
/// the default filters neither log nor export them as traces of their own.
fn is_routine(service: &str, method: &str) -> bool {
    service.starts_with("grpc.health.")
        || service.starts_with("grpc.reflection.")
        || method == "Heartbeat"
}

/// The span of one RPC (a span's level is fixed where it is declared, hence
/// the two declarations).
fn rpc_span(service: &str, method: &str) -> tracing::Span {
    macro_rules! span_at {
        ($level:expr) => {
            tracing::span!(
                $level,
                "rpc",
                otel.name = %format_args!("{service}/{method}"),
                otel.kind = "server",
                otel.status_code = tracing::field::Empty,
                rpc.system = "grpc",
                rpc.service = %service,
                rpc.method = %method,
                rpc.grpc.status_code = tracing::field::Empty,
                mcp.task.id = tracing::field::Empty,
                task_id = tracing::field::Empty,
                trace_id = tracing::field::Empty,
            )
        };
    }
    if is_routine(service, method) {
        span_at!(tracing::Level::DEBUG)
    } else {
        span_at!(tracing::Level::INFO)
    }
}

#[cfg(test)]
mod tests {
    use super::is_routine;

    #[test]
    fn health_reflection_and_heartbeats_are_routine_and_task_rpcs_are_not() {
        assert!(is_routine("grpc.health.v1.Health", "Check"));
        assert!(is_routine(
            "grpc.reflection.v1.ServerReflection",
            "ServerReflectionInfo"
        ));
        assert!(is_routine("mcp.tasks.v1.TaskExecution", "Heartbeat"));
        assert!(!is_routine("mcp.tasks.v1.TaskStore", "CreateTask"));
        assert!(!is_routine("mcp.tasks.v1.TaskExecution", "StoreTaskResult"));
    }
}
