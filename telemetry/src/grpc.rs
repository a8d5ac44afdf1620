//! What both sides of a gRPC call need to observe it: the RPC's name from
//! its path, a response body that reports how the call ended (its
//! `grpc-status`, which for most calls only arrives in the trailers, after
//! the last message), and a client layer that gives every outgoing call a
//! span and passes the trace context on.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use tower::{Layer, Service};
use tracing::Instrument;

use crate::propagation::inject_into;

/// gRPC status codes used here.
pub const OK: i32 = 0;
pub const CANCELLED: i32 = 1;
pub const UNKNOWN: i32 = 2;

/// The gRPC code's name, for metric labels (`OK`, `NOT_FOUND`, …).
pub fn code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "UNKNOWN",
    }
}

/// Whether a server span with this code is an error (the semantic
/// conventions: the server's fault, not the caller's).
pub fn is_server_error(code: i32) -> bool {
    matches!(code, 2 | 4 | 12 | 13 | 14 | 15)
}

/// `("pkg.Service", "Method")` of a request path `/pkg.Service/Method`.
pub fn rpc_name(path: &str) -> (&str, &str) {
    let mut parts = path.trim_start_matches('/').splitn(2, '/');
    let service = parts.next().unwrap_or_default();
    let method = parts.next().unwrap_or_default();
    (service, method)
}

/// The `grpc-status` of a header map (a trailers-only response, or the
/// trailers themselves).
pub fn grpc_status(headers: &http::HeaderMap) -> Option<i32> {
    headers
        .get("grpc-status")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok())
}

/// Called once with the RPC's final gRPC code.
pub type OnEnd = Box<dyn FnOnce(i32) + Send>;

pin_project_lite::pin_project! {
    /// A response body that reports, once, how the RPC ended: the
    /// `grpc-status` of its trailers (or of its headers, for a trailers-only
    /// response), UNKNOWN when it fails, CANCELLED when it is dropped before
    /// its end (the peer went away). Streams report when they end.
    pub struct ObservedBody<B> {
        #[pin]
        inner: B,
        code: Option<i32>,
        on_end: Option<OnEnd>,
    }

    impl<B> PinnedDrop for ObservedBody<B> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(on_end) = this.project().on_end.take() {
                on_end(CANCELLED);
            }
        }
    }
}

impl<B> ObservedBody<B> {
    /// `code` is the status already known from the headers, if any.
    pub fn new(inner: B, code: Option<i32>, on_end: OnEnd) -> Self {
        Self {
            inner,
            code,
            on_end: Some(on_end),
        }
    }
}

impl<B: Body> Body for ObservedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let polled = this.inner.poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(Some(Ok(frame))) => frame.trailers_ref().and_then(grpc_status),
            // A stream without trailers ended abnormally, unless the
            // headers already carried the status.
            Poll::Ready(None) => Some(this.code.unwrap_or(UNKNOWN)),
            Poll::Ready(Some(Err(_))) => Some(UNKNOWN),
            Poll::Pending => None,
        };
        // Take the callback only once the call has ended.
        if let Some(code) = ended
            && let Some(on_end) = this.on_end.take()
        {
            on_end(code);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Records an RPC's end on its span (and marks errors).
pub fn record_end(span: &tracing::Span, code: i32, is_error: bool) {
    span.record("rpc.grpc.status_code", code);
    if is_error {
        span.record("otel.status_code", "ERROR");
    }
}

/// A span for every outgoing RPC, with the trace context in its metadata:
/// `TaskStoreClient::new(ClientTracing::new(channel))`.
#[derive(Debug, Clone)]
pub struct ClientTracing<S> {
    inner: S,
}

impl<S> ClientTracing<S> {
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

/// [`ClientTracing`] as a tower layer.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientTracingLayer;

impl<S> Layer<S> for ClientTracingLayer {
    type Service = ClientTracing<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ClientTracing::new(inner)
    }
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for ClientTracing<S>
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
        let span = tracing::info_span!(
            "rpc call",
            otel.name = %format_args!("{service}/{method}"),
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            rpc.system = "grpc",
            rpc.service = %service,
            rpc.method = %method,
            rpc.grpc.status_code = tracing::field::Empty,
        );
        inject_into(&span, request.headers_mut());
        let call = self.inner.call(request).instrument(span.clone());
        observe_response(
            call,
            Box::new(move |code| record_end(&span, code, code != OK)),
        )
    }
}

/// A response future whose response body reports the call's end to
/// `on_end` (the shared part of the client and server layers).
pub type ObservedFuture<B, E> =
    Pin<Box<dyn Future<Output = Result<http::Response<ObservedBody<B>>, E>> + Send>>;

/// Wraps `call`'s response body so that `on_end` learns the call's code.
pub fn observe_response<F, B, E>(call: F, on_end: OnEnd) -> ObservedFuture<B, E>
where
    F: Future<Output = Result<http::Response<B>, E>> + Send + 'static,
{
    Box::pin(async move {
        let response = call.await?;
        let code = grpc_status(response.headers());
        Ok(response.map(|body| ObservedBody::new(body, code, on_end)))
    })
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    use http_body_util::{BodyExt, StreamBody};

    use super::*;

    type Frames = Vec<Result<Frame<&'static [u8]>, Infallible>>;
    type Observed = ObservedBody<
        StreamBody<
            tokio_stream::Iter<std::vec::IntoIter<Result<Frame<&'static [u8]>, Infallible>>>,
        >,
    >;

    /// A body of `frames`, observed; returns it and the codes it reported.
    fn observed(frames: Frames, headers_code: Option<i32>) -> (Observed, Arc<Mutex<Vec<i32>>>) {
        let reported = Arc::new(Mutex::new(Vec::new()));
        let sink = reported.clone();
        let body = ObservedBody::new(
            StreamBody::new(tokio_stream::iter(frames)),
            headers_code,
            Box::new(move |code| sink.lock().expect("lock").push(code)),
        );
        (body, reported)
    }

    fn trailers(code: i32) -> Frame<&'static [u8]> {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", code.into());
        Frame::trailers(trailers)
    }

    #[tokio::test]
    async fn the_code_of_the_trailers_is_reported_once_at_the_end() {
        let (body, reported) = observed(
            vec![
                Ok(Frame::data(b"one")),
                Ok(Frame::data(b"two")),
                Ok(trailers(5)),
            ],
            None,
        );
        body.collect().await.expect("collect");
        assert_eq!(*reported.lock().expect("lock"), [5]);
    }

    #[tokio::test]
    async fn a_trailers_only_response_reports_the_code_of_its_headers() {
        let (body, reported) = observed(Vec::new(), Some(3));
        body.collect().await.expect("collect");
        assert_eq!(*reported.lock().expect("lock"), [3]);
    }

    #[tokio::test]
    async fn a_body_dropped_before_its_end_is_cancelled() {
        let (mut body, reported) = observed(vec![Ok(Frame::data(b"one")), Ok(trailers(0))], None);
        body.frame().await.expect("a frame").expect("data");
        assert!(reported.lock().expect("lock").is_empty(), "not ended yet");
        drop(body);
        assert_eq!(*reported.lock().expect("lock"), [CANCELLED]);
    }

    #[test]
    fn rpc_names_come_from_the_path() {
        assert_eq!(
            rpc_name("/mcp.tasks.v1.TaskStore/CreateTask"),
            ("mcp.tasks.v1.TaskStore", "CreateTask")
        );
        assert_eq!(rpc_name("/"), ("", ""));
        assert_eq!(code_name(14), "UNAVAILABLE");
        assert_eq!(code_name(99), "UNKNOWN");
    }
}
