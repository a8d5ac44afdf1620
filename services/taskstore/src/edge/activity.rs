//! A connection's activity: how many of its requests are in flight (until
//! their response bodies end, so that an open stream counts), and since
//! when it has had none. The accept loop closes a connection idle for too
//! long, whatever protocol it speaks: an HTTP/1 keep-alive connection
//! between requests, or an HTTP/2 one that never opens a stream.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use bytes::Bytes;
use http::{Request, Response};
use tokio::time::Instant;
use tower::ServiceExt as _;

/// One connection's in-flight requests and last moment of activity.
#[derive(Debug)]
pub(super) struct Activity {
    in_flight: AtomicUsize,
    last_active: Mutex<Instant>,
}

impl Activity {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            in_flight: AtomicUsize::new(0),
            last_active: Mutex::new(Instant::now()),
        })
    }

    fn touch(&self) {
        *self
            .last_active
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.touch();
        InFlight(self.clone())
    }

    /// Resolves once the connection has had no request in flight for
    /// `idle`.
    pub(super) async fn idle_for(&self, idle: Duration) {
        loop {
            let since = *self
                .last_active
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if self.in_flight.load(Ordering::SeqCst) == 0 && since.elapsed() >= idle {
                return;
            }
            // Busy or recently active: look again when it could be idle.
            let wake = (since + idle).max(Instant::now() + idle / 4);
            tokio::time::sleep_until(wake).await;
        }
    }
}

/// A request in flight; ends when dropped.
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `app`, counting each request on `activity` until its response's body
/// ends (or is dropped).
pub(super) fn tracked(
    app: Router,
    activity: Arc<Activity>,
) -> impl tower::Service<
    Request<hyper::body::Incoming>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Body>, Infallible>> + Send,
> + Clone {
    tower::service_fn(move |request: Request<hyper::body::Incoming>| {
        let (app, in_flight) = (app.clone(), activity.begin());
        async move {
            let response = app.oneshot(request.map(Body::new)).await?;
            Ok(response.map(|body| {
                Body::new(Counted {
                    body,
                    _in_flight: in_flight,
                })
            }))
        }
    })
}

pin_project_lite::pin_project! {
    /// A response body that holds its request's [`InFlight`] until it ends.
    struct Counted {
        #[pin]
        body: Body,
        _in_flight: InFlight,
    }
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_counts_from_the_last_request_and_never_while_one_is_open() {
        let activity = Activity::new();
        let open = activity.begin();
        let started = Instant::now();
        let idle = activity.clone();
        let waiting = tokio::spawn(async move { idle.idle_for(Duration::from_secs(10)).await });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(
            !waiting.is_finished(),
            "a request in flight is not idleness"
        );
        drop(open);
        waiting.await.expect("idle");
        assert!(started.elapsed() >= Duration::from_secs(70));
    }
}
