//! Answers that may send requests first (2025-11-25 Streamable HTTP): a
//! waiting `tasks/result` or synchronous `tools/call` whose task asks a
//! question answers as a server-sent event stream (the question as a
//! request, then the response); one whose task asks nothing answers with
//! plain JSON, as before. The wait runs in a task of its own, so that the
//! moment a question comes, the stream starts.

use std::convert::Infallible;
use std::future::Future;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::jsonrpc::{self, Id, RpcError};

/// Requests a wait sends before its answer, at most this many queued.
const QUEUED_REQUESTS: usize = 16;

/// A wait running in the background: the requests it sends, and its
/// outcome.
pub(super) struct Waiting {
    requests: mpsc::Receiver<Value>,
    done: oneshot::Receiver<Result<Value, RpcError>>,
}

impl std::fmt::Debug for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Waiting")
    }
}

/// Starts `work`, which sends requests on the sender it is given and ends
/// with the answer. It sees the sender close when nobody listens any more
/// (the client went away).
pub(super) fn spawn_waiting<F, Fut>(work: F) -> Waiting
where
    F: FnOnce(mpsc::Sender<Value>) -> Fut,
    Fut: Future<Output = Result<Value, RpcError>> + Send + 'static,
{
    let (sender, requests) = mpsc::channel(QUEUED_REQUESTS);
    let (finished, done) = oneshot::channel();
    let work = work(sender);
    tokio::spawn(async move {
        let _ = finished.send(work.await);
    });
    Waiting { requests, done }
}

/// The HTTP answer to request `id`: JSON when the wait ended before it
/// sent anything, else an event stream of its requests and then the
/// response. `answered` is told the outcome when it is known (for metrics).
pub(super) async fn respond(
    mut waiting: Waiting,
    id: Id,
    answered: impl FnOnce(&Result<Value, RpcError>) + Send + 'static,
) -> Response {
    let first = waiting.requests.recv().await;
    let Some(first) = first else {
        // Done without a request: its outcome is all there is.
        let outcome = outcome_of(waiting.done.await);
        answered(&outcome);
        return json_answer(&id, outcome);
    };
    let events = event_stream(first, waiting, id, answered);
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
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

/// The event stream: `first`, the requests after it, then the response.
fn event_stream(
    first: Value,
    waiting: Waiting,
    id: Id,
    answered: impl FnOnce(&Result<Value, RpcError>) + Send + 'static,
) -> impl futures_util::Stream<Item = Result<Event, Infallible>> + Send {
    enum Phase<F> {
        First(Value, Waiting, Id, F),
        Requests(Waiting, Id, F),
        Done,
    }
    let start = Phase::First(first, waiting, id, answered);
    futures_util::stream::unfold(start, |phase| async move {
        match phase {
            Phase::First(first, waiting, id, answered) => {
                Some((event(&first), Phase::Requests(waiting, id, answered)))
            }
            Phase::Requests(mut waiting, id, answered) => match waiting.requests.recv().await {
                Some(request) => Some((event(&request), Phase::Requests(waiting, id, answered))),
                None => {
                    let outcome = outcome_of(waiting.done.await);
                    answered(&outcome);
                    let response = jsonrpc::response(Some(&id), outcome);
                    Some((event(&response), Phase::Done))
                }
            },
            Phase::Done => None,
        }
    })
}

fn event(message: &Value) -> Result<Event, Infallible> {
    Ok(Event::default().data(message.to_string()))
}
