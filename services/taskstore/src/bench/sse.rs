//! A server-sent event stream read as a client reads it: events split on
//! blank lines, `id:` remembered (for `Last-Event-ID`), `retry:` kept,
//! comments (keep-alives) skipped.

use std::time::Duration;

/// One event.
#[derive(Debug, Clone, Default)]
pub(crate) struct SseEvent {
    pub id: Option<String>,
    /// The data lines joined; `None` when the event has none, or an empty one.
    pub data: Option<String>,
    pub retry: Option<Duration>,
}

/// The event stream of one response.
#[derive(Debug)]
pub(crate) struct SseReader {
    response: reqwest::Response,
    buffer: Vec<u8>,
    /// An event read ahead by [`SseReader::peek`].
    pending: Option<SseEvent>,
    /// The id of the latest event that had one.
    pub last_id: Option<String>,
    /// The latest retry delay the server asked for.
    pub retry: Option<Duration>,
}

impl SseReader {
    pub(crate) fn new(response: reqwest::Response) -> Self {
        Self {
            response,
            buffer: Vec::new(),
            pending: None,
            last_id: None,
            retry: None,
        }
    }

    /// Waits for the first event, leaving it to [`SseReader::next`];
    /// fails if the stream ends before it.
    pub(crate) async fn peek(&mut self) -> Result<(), String> {
        match self.read().await {
            Ok(Some(event)) => {
                self.pending = Some(event);
                Ok(())
            }
            Ok(None) => Err("the stream ended before its first event".into()),
            Err(err) => Err(err.to_string()),
        }
    }

    /// The next event; `Ok(None)` once the server ended the stream.
    pub(crate) async fn next(&mut self) -> Result<Option<SseEvent>, reqwest::Error> {
        match self.pending.take() {
            Some(event) => Ok(Some(event)),
            None => self.read().await,
        }
    }

    async fn read(&mut self) -> Result<Option<SseEvent>, reqwest::Error> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|pair| pair == b"\n\n") {
                let raw: Vec<u8> = self.buffer.drain(..end + 2).collect();
                if let Some(event) = parse(&String::from_utf8_lossy(&raw)) {
                    if event.id.is_some() {
                        self.last_id.clone_from(&event.id);
                    }
                    if event.retry.is_some() {
                        self.retry = event.retry;
                    }
                    return Ok(Some(event));
                }
                continue;
            }
            match self.response.chunk().await? {
                Some(chunk) => self.buffer.extend_from_slice(&chunk),
                None => return Ok(None),
            }
        }
    }
}

/// An event's fields; `None` for a comment alone.
fn parse(raw: &str) -> Option<SseEvent> {
    let mut event = SseEvent::default();
    let mut data: Option<String> = None;
    let mut any = false;
    for line in raw.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() || line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        any = true;
        match field {
            "id" => event.id = Some(value.to_owned()),
            "retry" => event.retry = value.parse().ok().map(Duration::from_millis),
            "data" => match &mut data {
                Some(joined) => {
                    joined.push('\n');
                    joined.push_str(value);
                }
                None => data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
    event.data = data.filter(|d| !d.is_empty());
    any.then_some(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_comments_ids_and_retry() {
        assert!(parse(":\n\n").is_none(), "a keep-alive comment");
        let priming = parse("id: abc\ndata: \n\n").expect("an event");
        assert_eq!(priming.id.as_deref(), Some("abc"));
        assert!(priming.data.is_none());
        let last = parse("retry: 500\nid: xyz\ndata:\n\n").expect("an event");
        assert_eq!(last.retry, Some(Duration::from_millis(500)));
        let message = parse("data: {\"a\":1}\r\nid: 7\r\n\r\n").expect("an event");
        assert_eq!(message.data.as_deref(), Some("{\"a\":1}"));
        assert_eq!(message.id.as_deref(), Some("7"));
        let split = parse("data: one\ndata: two\n\n").expect("an event");
        assert_eq!(split.data.as_deref(), Some("one\ntwo"));
    }
}
