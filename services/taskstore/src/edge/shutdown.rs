//! Open streams and waiting calls end at once when the server shuts down,
//! with [`ShuttingDown`] (gRPC: UNAVAILABLE), instead of holding the
//! shutdown until its grace period runs out (a WatchTask, an MCP stream or
//! a waiting result may never end by itself).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio_stream::Stream;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// The message every edge gives a call cut short by a shutdown; clients
/// recognise it. Retrying is safe: another replica, or this one after its
/// restart, answers.
pub const SHUTTING_DOWN: &str = "the service is shutting down";

/// A call or stream cut short by a shutdown; each edge says it its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{SHUTTING_DOWN}")]
pub struct ShuttingDown;

/// Runs `call` unless `shutdown` fires first.
pub async fn unless_shutting_down<T, E: From<ShuttingDown>>(
    shutdown: &CancellationToken,
    call: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    tokio::select! {
        () = shutdown.cancelled() => Err(E::from(ShuttingDown)),
        result = call => result,
    }
}

/// A stream that ends with [`ShuttingDown`] as soon as `shutdown` fires.
pub struct EndOnShutdown<S> {
    inner: Option<S>,
    stopping: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<S> std::fmt::Debug for EndOnShutdown<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndOnShutdown")
            .field("ended", &self.inner.is_none())
            .finish_non_exhaustive()
    }
}

impl<S> EndOnShutdown<S> {
    pub fn new(inner: S, shutdown: CancellationToken) -> Self {
        Self {
            inner: Some(inner),
            stopping: Box::pin(shutdown.cancelled_owned()),
        }
    }
}

impl<S, T, E> Stream for EndOnShutdown<S>
where
    S: Stream<Item = Result<T, E>> + Unpin,
    E: From<ShuttingDown>,
{
    type Item = Result<T, E>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        if this.stopping.as_mut().poll(cx).is_ready() {
            this.inner = None;
            return Poll::Ready(Some(Err(E::from(ShuttingDown))));
        }
        let next = Pin::new(inner).poll_next(cx);
        if let Poll::Ready(None) = next {
            this.inner = None;
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_stream::StreamExt;

    #[tokio::test]
    async fn a_stream_ends_with_shutting_down_on_shutdown_and_not_before() {
        let shutdown = CancellationToken::new();
        let (sender, receiver) = tokio::sync::mpsc::channel::<Result<u8, ShuttingDown>>(4);
        let mut stream = EndOnShutdown::new(
            tokio_stream::wrappers::ReceiverStream::new(receiver),
            shutdown.clone(),
        );
        sender.send(Ok(1)).await.expect("send");
        assert_eq!(stream.next().await, Some(Ok(1)));
        shutdown.cancel();
        assert_eq!(stream.next().await, Some(Err(ShuttingDown)));
        assert!(stream.next().await.is_none(), "nothing after the shutdown");
    }

    #[tokio::test]
    async fn a_stream_that_ends_by_itself_ends_cleanly() {
        let shutdown = CancellationToken::new();
        let mut stream = EndOnShutdown::new(
            tokio_stream::iter([Ok::<u8, ShuttingDown>(7)]),
            shutdown.clone(),
        );
        assert_eq!(stream.next().await, Some(Ok(7)));
        assert!(stream.next().await.is_none());
        shutdown.cancel();
        assert!(
            stream.next().await.is_none(),
            "already ended: no error after it"
        );
    }

    #[tokio::test]
    async fn a_call_is_cut_short_only_by_a_shutdown() {
        let shutdown = CancellationToken::new();
        let done: Result<u8, ShuttingDown> = unless_shutting_down(&shutdown, async { Ok(3) }).await;
        assert_eq!(done, Ok(3));
        shutdown.cancel();
        let cut: Result<u8, ShuttingDown> =
            unless_shutting_down(&shutdown, std::future::pending()).await;
        assert_eq!(cut, Err(ShuttingDown));
    }
}
