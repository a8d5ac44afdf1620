//! Waiting for a task to end, as a synchronous `tools/call` and 2025-11-25
//! `tasks/result` do: until it ended, the gateway stops, or the wait runs
//! out, and then what it ended with. Meanwhile the task may ask questions:
//! sent to the client as they come (2025-11-25, on the response stream),
//! or ending the wait (a 2026-07-28 synchronous call answers
//! `input_required`).

use std::collections::HashSet;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;

use super::asking;
use super::gateway::Gateway;
use super::jsonrpc::{RpcError, code};
use crate::domain::{InputKey, Question, Scope, Task, TaskId, TaskResult, TaskStatus};
use crate::error::{Refusal, StoreError};

/// How a wait for a task ended.
pub(super) enum Ending {
    /// With its stored result.
    Result(TaskResult),
    /// Ended without one (cancelled, or failed with nothing stored).
    WithoutResult(Task),
    /// Still running when the wait ran out.
    StillRunning(Task),
    /// It asks: these questions are open (only with [`Questions::EndTheWait`]).
    NeedsInput(Vec<Question>),
}

/// What a wait does with the task's questions.
pub(super) enum Questions<'a> {
    /// Sends each open question once, as a request on `to`; `related`: tied
    /// to its task (the client called it as a task).
    Send {
        to: &'a mpsc::Sender<Value>,
        related: bool,
    },
    /// Ends the wait with them.
    EndTheWait,
}

/// Waits up to the gateway's `max_wait` for `task_id` to end.
pub(super) async fn wait_for_end(
    gateway: &Gateway,
    scope: &Scope,
    task_id: &TaskId,
    questions: Questions<'_>,
) -> Result<Ending, RpcError> {
    let deadline = tokio::time::Instant::now() + gateway.settings.max_wait;
    let mut changes = gateway.store.watch_task(scope, task_id).await?;
    let mut sent: HashSet<InputKey> = HashSet::new();
    let gone = || RpcError::new(code::UNAVAILABLE, "the client went away");
    loop {
        let change = tokio::select! {
            () = gateway.shutdown.cancelled() => {
                return Err(StoreError::Unavailable("the server is stopping".into()).into());
            }
            () = tokio::time::sleep_until(deadline) => {
                return Ok(Ending::StillRunning(gateway.store.get_task(scope, task_id).await?));
            }
            () = closed(&questions) => return Err(gone()),
            change = changes.next() => change,
        };
        let task = match change {
            // The watch ends after the terminal state.
            None => break,
            Some(task) => task?,
        };
        if task.status.is_terminal() {
            break;
        }
        if task.status != TaskStatus::InputRequired {
            continue;
        }
        let open: Vec<Question> = gateway
            .store
            .input_requests(scope, task_id)
            .await?
            .into_iter()
            .filter(|q| q.answer.is_none())
            .collect();
        match &questions {
            Questions::EndTheWait if !open.is_empty() => return Ok(Ending::NeedsInput(open)),
            Questions::EndTheWait => {}
            Questions::Send { to, related } => {
                for question in open.iter().filter(|q| sent.insert(q.key.clone())) {
                    let request =
                        asking::input_request(gateway, scope, task_id, question, *related);
                    to.send(request).await.map_err(|_| gone())?;
                }
            }
        }
    }
    ended(gateway, scope, task_id).await
}

/// Resolves when the client stopped listening for the questions sent to it.
async fn closed(questions: &Questions<'_>) {
    match questions {
        Questions::Send { to, .. } => to.closed().await,
        Questions::EndTheWait => std::future::pending().await,
    }
}

/// What a terminal task ended with.
async fn ended(gateway: &Gateway, scope: &Scope, task_id: &TaskId) -> Result<Ending, RpcError> {
    match gateway.store.get_result(scope, task_id).await {
        Ok(stored) => Ok(Ending::Result(stored)),
        Err(StoreError::FailedPrecondition(Refusal::NoResult(_))) => {
            let now = gateway.store.get_task(scope, task_id).await?;
            Ok(if now.status.is_terminal() {
                Ending::WithoutResult(now)
            } else {
                Ending::StillRunning(now)
            })
        }
        Err(err) => Err(err.into()),
    }
}

/// A stored `CallToolResult` as JSON.
pub(super) fn result_json(stored: &TaskResult) -> Result<Value, RpcError> {
    serde_json::from_str(stored.result.as_str())
        .map_err(|_| RpcError::new(code::INTERNAL_ERROR, "a stored result is not JSON"))
}
