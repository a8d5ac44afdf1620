//! Answers that may send messages first (2025-11-25 Streamable HTTP): a
//! waiting `tasks/result` or synchronous `tools/call` answers with plain
//! JSON unless, before its answer, it sends a question (or a synchronous
//! call's progress): then it answers as a server-sent event stream. Once
//! streaming, the task's status notifications go along. Every event carries
//! an id (`resume.rs`), so a client whose stream breaks resumes it, with
//! `Last-Event-ID`, on any replica.
//!
//! When the gateway stops, a wait hands over instead of failing: its
//! answer becomes (or its stream ends with) an event holding only an id and
//! a retry delay, and the client resumes on another replica. The wait runs
//! in a task of its own, so that the moment it has something to send, the
//! stream starts.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::gateway::Gateway;
use super::jsonrpc::{self, Id, RpcError};
use super::resume::{Position, WaitKind, WaitPosition};
use super::sse::{Event, EventSource, events_of, sse};
use crate::domain::Scope;

/// Messages a wait sends before its answer, at most this many queued.
const QUEUED: usize = 16;

/// How long a client is told to wait before it resumes a stream that
/// ended without its answer (the gateway stopping).
pub(super) const RESUME_AFTER: Duration = Duration::from_millis(500);

/// What a wait sends before its answer.
#[derive(Debug)]
pub(super) enum Outgoing {
    /// A question (a request to the client); once sent, the task's first
    /// `seen` questions are handled.
    Question { request: Value, seen: usize },
    /// A notification. `starts`: it starts the stream (a synchronous call's
    /// progress); otherwise it is sent only on a stream already started.
    Notification { message: Value, starts: bool },
}

/// The sending side a wait is given.
#[derive(Debug, Clone)]
pub(super) struct Outbox {
    sender: mpsc::Sender<Outgoing>,
    handed_over: Arc<AtomicBool>,
}

impl Outbox {
    /// Sends `message`; `Err` when nobody listens any more.
    pub(super) async fn send(&self, message: Outgoing) -> Result<(), ()> {
        self.sender.send(message).await.map_err(|_| ())
    }

    /// Resolves when nobody listens any more.
    pub(super) async fn closed(&self) {
        self.sender.closed().await;
    }

    /// Whether the client can resume this wait elsewhere (its stream has
    /// event ids, or the gateway stopped and told it to): then a closed
    /// outbox is not an abandoned call.
    pub(super) fn handed_over(&self) -> bool {
        self.handed_over.load(Ordering::SeqCst)
    }
}

/// A wait running in the background: what it sends, and its outcome.
pub(super) struct Waiting {
    outgoing: mpsc::Receiver<Outgoing>,
    done: oneshot::Receiver<Result<Value, RpcError>>,
    handed_over: Arc<AtomicBool>,
    position: WaitPosition,
}

impl std::fmt::Debug for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiting")
            .field("position", &self.position)
            .finish_non_exhaustive()
    }
}

/// Starts `work`, which sends on the outbox it is given and ends with the
/// answer to the request `position` names.
pub(super) fn spawn_waiting<F, Fut>(position: WaitPosition, work: F) -> Waiting
where
    F: FnOnce(Outbox) -> Fut,
    Fut: Future<Output = Result<Value, RpcError>> + Send + 'static,
{
    let (sender, outgoing) = mpsc::channel(QUEUED);
    let (finished, done) = oneshot::channel();
    let handed_over = Arc::new(AtomicBool::new(false));
    let work = work(Outbox {
        sender,
        handed_over: handed_over.clone(),
    });
    tokio::spawn(async move {
        let _ = finished.send(work.await);
    });
    Waiting {
        outgoing,
        done,
        handed_over,
        position,
    }
}

/// The HTTP answer to a waiting request: JSON when the wait ends before it
/// has anything to stream, else an event stream. `answered` is told the
/// outcome when it is known (for metrics).
pub(super) async fn respond(
    gateway: Arc<Gateway>,
    scope: Scope,
    waiting: Waiting,
    answered: impl FnOnce(&Result<Value, RpcError>) + Send + 'static,
) -> Response {
    let mut waiting = waiting;
    let first = loop {
        tokio::select! {
            () = gateway.shutdown.cancelled() => {
                let stream = Streaming::new(gateway, scope, waiting, None, answered);
                return sse(stream.hand_over_now());
            }
            message = waiting.outgoing.recv() => match message {
                // Nothing streams yet: a status change is not worth a stream.
                Some(Outgoing::Notification { starts: false, .. }) => {}
                Some(message) => break message,
                None => {
                    let outcome = outcome_of(waiting.done.await);
                    answered(&outcome);
                    let id = waiting.position.request_id.clone();
                    return json_answer(&id, outcome);
                }
            },
        }
    };
    stream_response(gateway, scope, waiting, Some(first), answered)
}

/// The answer as an event stream from the start (a resumed wait, on GET).
pub(super) fn stream_response(
    gateway: Arc<Gateway>,
    scope: Scope,
    waiting: Waiting,
    first: Option<Outgoing>,
    answered: impl FnOnce(&Result<Value, RpcError>) + Send + 'static,
) -> Response {
    // From here the client can resume: a broken stream is not an
    // abandoned call.
    waiting.handed_over.store(true, Ordering::SeqCst);
    sse(events_of(Streaming::new(
        gateway, scope, waiting, first, answered,
    )))
}

fn outcome_of(
    done: Result<Result<Value, RpcError>, oneshot::error::RecvError>,
) -> Result<Value, RpcError> {
    done.unwrap_or_else(|_| {
        Err(RpcError::new(
            jsonrpc::code::INTERNAL_ERROR,
            "the wait ended without an answer",
        ))
    })
}

fn json_answer(id: &Id, outcome: Result<Value, RpcError>) -> Response {
    (
        [(http::header::CONTENT_TYPE, "application/json")],
        jsonrpc::response(Some(id), outcome).to_string(),
    )
        .into_response()
}

/// A wait's event stream, as it goes.
struct Streaming<F> {
    gateway: Arc<Gateway>,
    scope: Scope,
    waiting: Waiting,
    first: Option<Outgoing>,
    /// Start with an event holding only the position (a stream that opens
    /// with nothing to say yet still shows its headers and where it is).
    prime: bool,
    answered: Option<F>,
    ended: bool,
    /// A `tasks/result` that streams carries its task's status changes
    /// itself: the session's `GET` stream leaves them out meanwhile. (One
    /// that answers plain JSON sends none, so the GET stream does.)
    _carried: Option<super::result_streams::ResultStream>,
}

impl<F> Streaming<F>
where
    F: FnOnce(&Result<Value, RpcError>) + Send + 'static,
{
    fn new(
        gateway: Arc<Gateway>,
        scope: Scope,
        waiting: Waiting,
        first: Option<Outgoing>,
        answered: F,
    ) -> Self {
        let carried = (waiting.position.kind == WaitKind::TasksResult).then(|| {
            gateway
                .result_streams
                .open(&scope, &waiting.position.task_id)
        });
        Self {
            gateway,
            scope,
            waiting,
            prime: first.is_none(),
            first,
            answered: Some(answered),
            ended: false,
            _carried: carried,
        }
    }

    fn event(&self, message: Option<&Value>) -> Event {
        let position = Position::Wait(self.waiting.position.clone());
        let mut event = match message {
            Some(message) => Event::default().data(message.to_string()),
            None => Event::default().data(""),
        };
        if let Some(id) = position.event_id(&self.gateway, &self.scope) {
            event = event.id(id);
        }
        event
    }

    /// The last event of a stream handed over: its position and when to
    /// come back.
    fn hand_over(&mut self) -> Event {
        self.waiting.handed_over.store(true, Ordering::SeqCst);
        self.ended = true;
        self.waiting.outgoing.close();
        self.event(None).retry(RESUME_AFTER)
    }

    fn hand_over_now(mut self) -> impl Stream<Item = Event> + Send {
        let last = self.hand_over();
        futures_util::stream::once(async move { last })
    }
}

impl<F> EventSource for Streaming<F>
where
    F: FnOnce(&Result<Value, RpcError>) + Send + 'static,
{
    /// The next event, or `None` once the answer (or the hand-over) went.
    async fn next_event(&mut self) -> Option<Event> {
        if self.ended {
            return None;
        }
        if std::mem::take(&mut self.prime) {
            return Some(self.event(None));
        }
        let message = match self.first.take() {
            Some(first) => Some(first),
            None => tokio::select! {
                () = self.gateway.shutdown.cancelled() => return Some(self.hand_over()),
                message = self.waiting.outgoing.recv() => message,
            },
        };
        match message {
            Some(Outgoing::Question { request, seen }) => {
                self.waiting.position.seen = seen;
                Some(self.event(Some(&request)))
            }
            Some(Outgoing::Notification { message, .. }) => Some(self.event(Some(&message))),
            None => {
                let outcome = outcome_of((&mut self.waiting.done).await);
                if let Some(answered) = self.answered.take() {
                    answered(&outcome);
                }
                self.ended = true;
                let id = self.waiting.position.request_id.clone();
                Some(self.event(Some(&jsonrpc::response(Some(&id), outcome))))
            }
        }
    }
}
