//! Every RPC the server answers, observed once, in one tower layer: a span
//! (a child of the caller's `traceparent`, named and described as the
//! OpenTelemetry conventions for gRPC say) that the handler's log lines and
//! the store's work happen in, and the `taskstore_rpc_*` metrics, both
//! completed when the response ends (for a stream, when the stream does).

use std::task::{Context, Poll};
use std::time::Instant;

use taskstore_telemetry::grpc::{
    ObservedBody, ObservedFuture, code_name, is_server_error, observe_response, record_end,
    rpc_name,
};
use taskstore_telemetry::propagation::{set_parent, trace_id_of, traceparent_in};
use tower::{Layer, Service};
use tracing::Instrument;

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
        let started = Instant::now();
        let call = self.inner.call(request).instrument(span.clone());
        observe_response(
            call,
            Box::new(move |code| {
                record_end(&span, code, is_server_error(code));
                crate::metrics::rpc_ended(&service, &method, code_name(code), started);
            }),
        )
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
