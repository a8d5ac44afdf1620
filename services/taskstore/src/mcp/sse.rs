//! Server-sent events as MCP clients read them. Written by hand rather
//! than with axum's `Sse` because an event that holds only a position (an
//! id, maybe a retry delay) must still carry an empty `data:` line: SSE
//! parsers (the TypeScript SDK's eventsource-parser among them) deliver no
//! event without data, so its id would never reach the client, and axum
//! writes no `data:` line for empty data.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};
use http::header;

/// How often an idle stream sends a comment, so that proxies keep it open.
pub(super) const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One event: its data (a JSON-RPC message; empty for an event that only
/// says where the stream is), id and retry delay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Event {
    data: String,
    id: Option<String>,
    retry: Option<Duration>,
}

impl Event {
    pub(super) fn data(mut self, data: impl Into<String>) -> Self {
        self.data = data.into();
        self
    }

    pub(super) fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    pub(super) fn retry(mut self, after: Duration) -> Self {
        self.retry = Some(after);
        self
    }

    /// The event on the wire. Ids are ours (base64url and dots) and data
    /// is one line of JSON; a line break in either would end the field, so
    /// each is split into lines as SSE requires.
    fn encode(&self) -> Bytes {
        let mut out = String::new();
        if let Some(id) = &self.id {
            out.push_str("id: ");
            out.push_str(&id.replace(['\n', '\r'], ""));
            out.push('\n');
        }
        if let Some(retry) = self.retry {
            out.push_str(&format!("retry: {}\n", retry.as_millis()));
        }
        for line in self.data.split('\n') {
            out.push_str("data: ");
            out.push_str(line.trim_end_matches('\r'));
            out.push('\n');
        }
        out.push('\n');
        Bytes::from(out)
    }
}

/// What makes an event stream one event at a time (`None`: it ended).
pub(super) trait EventSource: Send + 'static {
    fn next_event(&mut self) -> impl Future<Output = Option<Event>> + Send;
}

/// The events of `source`.
pub(super) fn events_of<S: EventSource>(source: S) -> impl Stream<Item = Event> + Send {
    futures_util::stream::unfold(source, |mut source| async move {
        let event = source.next_event().await?;
        Some((event, source))
    })
}

/// An answer whose body is `events`, with a comment whenever the stream
/// was quiet for [`KEEP_ALIVE`].
pub(super) fn sse(events: impl Stream<Item = Event> + Send + 'static) -> Response {
    let events = Box::pin(events);
    let body = futures_util::stream::unfold(Some(events), |events| async move {
        let mut events = events?;
        tokio::select! {
            event = events.next() => {
                event.map(|event| (Ok::<_, Infallible>(event.encode()), Some(events)))
            }
            () = tokio::time::sleep(KEEP_ALIVE) => {
                Some((Ok(Bytes::from_static(b": keep-alive\n\n")), Some(events)))
            }
        }
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_alone_still_has_a_data_line() {
        let event = Event::default().id("abc").retry(Duration::from_millis(500));
        assert_eq!(event.encode(), "id: abc\nretry: 500\ndata: \n\n");
        let message = Event::default().data(r#"{"a":1}"#).id("x");
        assert_eq!(message.encode(), "id: x\ndata: {\"a\":1}\n\n");
        let lines = Event::default().data("one\ntwo");
        assert_eq!(lines.encode(), "data: one\ndata: two\n\n");
    }
}
