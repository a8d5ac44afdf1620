//! Open streams and waiting calls end at once when the server shuts down,
//! with UNAVAILABLE, instead of holding the shutdown until its grace period
//! runs out (a WatchTask or a waiting GetTaskResult may never end by itself).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio_stream::Stream;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tonic::Status;

/// What a caller whose call was cut short by a shutdown gets. Retrying is
/// safe: another replica, or this one after its restart, answers.
pub fn shutting_down() -> Status {
    Status::unavailable(SHUTTING_DOWN)
}

/// The message of [`shutting_down`], which clients recognise.
pub const SHUTTING_DOWN: &str = "the service is shutting down";

/// Runs `call` unless `shutdown` fires first.
pub(super) async fn unless_shutting_down<T>(
    shutdown: &CancellationToken,
    call: impl Future<Output = Result<T, Status>>,
) -> Result<T, Status> {
    tokio::select! {
        () = shutdown.cancelled() => Err(shutting_down()),
        result = call => result,
    }
}

/// A stream that ends with [`shutting_down`] as soon as `shutdown` fires.
pub(super) struct EndOnShutdown<S> {
    inner: Option<S>,
    stopping: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<S> EndOnShutdown<S> {
    pub(super) fn new(inner: S, shutdown: CancellationToken) -> Self {
        Self {
            inner: Some(inner),
            stopping: Box::pin(shutdown.cancelled_owned()),
        }
    }
}

impl<S, T> Stream for EndOnShutdown<S>
where
    S: Stream<Item = Result<T, Status>> + Unpin,
{
    type Item = Result<T, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        if this.stopping.as_mut().poll(cx).is_ready() {
            this.inner = None;
            return Poll::Ready(Some(Err(shutting_down())));
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
    async fn a_stream_ends_with_unavailable_on_shutdown_and_not_before() {
        let shutdown = CancellationToken::new();
        let (sender, receiver) = tokio::sync::mpsc::channel::<Result<u8, Status>>(4);
        let mut stream = EndOnShutdown::new(
            tokio_stream::wrappers::ReceiverStream::new(receiver),
            shutdown.clone(),
        );
        sender.send(Ok(1)).await.expect("send");
        assert_eq!(stream.next().await.map(|i| i.ok()), Some(Some(1)));
        shutdown.cancel();
        let ended = stream.next().await.expect("an item");
        assert_eq!(ended.map_err(|s| s.code()), Err(tonic::Code::Unavailable));
        assert!(stream.next().await.is_none(), "nothing after the shutdown");
    }

    #[tokio::test]
    async fn a_stream_that_ends_by_itself_ends_cleanly() {
        let shutdown = CancellationToken::new();
        let mut stream =
            EndOnShutdown::new(tokio_stream::iter([Ok::<u8, Status>(7)]), shutdown.clone());
        assert_eq!(stream.next().await.map(|i| i.ok()), Some(Some(7)));
        assert!(stream.next().await.is_none());
        shutdown.cancel();
        assert!(
            stream.next().await.is_none(),
            "already ended: no error after it"
        );
    }
}
