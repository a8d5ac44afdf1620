//! Waiting for a task to end, as a synchronous `tools/call` and 2025-11-25
//! `tasks/result` do: until it ended, the client goes away, the gateway
//! stops, or the wait runs out, and then what it ended with. Meanwhile the
//! task may ask questions: sent to the client as they come (2025-11-25, on
//! the response stream, with the task's status or progress notifications),
//! or ending the wait (a 2026-07-28 synchronous call answers
//! `input_required`).

use serde_json::{Value, json};
use tokio_stream::StreamExt;

use super::asking;
use super::gateway::Gateway;
use super::jsonrpc::{RpcError, code};
use super::shapes;
use super::streams::{Outbox, Outgoing};
use crate::domain::{ProgressToken, Question, Scope, Task, TaskId, TaskResult, TaskStatus};
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

/// What a 2025-11-25 wait tells its client besides the questions.
#[derive(Debug, Clone)]
pub(super) enum Tell {
    /// `notifications/tasks/status` for each change (`tasks/result`: the
    /// client knows the task).
    Status,
    /// `notifications/progress` for each progress message (a synchronous
    /// call that asked for progress).
    Progress(ProgressToken),
    Nothing,
}

/// What a wait does with the task's questions.
pub(super) enum Questions<'a> {
    /// Sends each open question once, as a request on `to`, after the
    /// task's first `seen` (already handled by this stream before it was
    /// resumed); `related`: tied to its task (the client called it as a
    /// task).
    Send {
        to: &'a Outbox,
        related: bool,
        seen: usize,
        tell: Tell,
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
    let mut seen = match &questions {
        Questions::Send { seen, .. } => *seen,
        Questions::EndTheWait => 0,
    };
    let gone = || RpcError::new(code::UNAVAILABLE, "the client went away");
    let mut first = true;
    loop {
        let change = tokio::select! {
            // A stream hands itself over when the gateway stops
            // (`streams.rs`) and the wait sees its outbox close; a wait
            // without one ends here.
            () = gateway.shutdown.cancelled(), if matches!(questions, Questions::EndTheWait) => {
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
        // The first item is the task as it was when the wait began.
        if let Questions::Send { to, tell, .. } = &questions
            && !std::mem::take(&mut first)
            && let Some(message) = told(tell, &task)
        {
            to.send(message).await.map_err(|()| gone())?;
        }
        if task.status.is_terminal() {
            break;
        }
        if task.status != TaskStatus::InputRequired {
            continue;
        }
        let asked = gateway.store.questions(scope, task_id).await?;
        match &questions {
            Questions::EndTheWait => {
                let open: Vec<Question> =
                    asked.into_iter().filter(|q| q.answer.is_none()).collect();
                if !open.is_empty() {
                    return Ok(Ending::NeedsInput(open));
                }
            }
            Questions::Send { to, related, .. } => {
                for (index, question) in asked.iter().enumerate().skip(seen) {
                    if question.answer.is_none() {
                        let request =
                            asking::input_request(gateway, scope, task_id, question, *related);
                        let message = Outgoing::Question {
                            request,
                            seen: index + 1,
                        };
                        to.send(message).await.map_err(|()| gone())?;
                    }
                }
                seen = seen.max(asked.len());
            }
        }
    }
    ended(gateway, scope, task_id).await
}

/// What `tell` says of a change to `task`, if anything.
fn told(tell: &Tell, task: &Task) -> Option<Outgoing> {
    match tell {
        Tell::Status => Some(Outgoing::Notification {
            message: status_notification(task),
            starts: false,
        }),
        Tell::Progress(token) => {
            let message = progress_notification(token, task)?;
            Some(Outgoing::Notification {
                message,
                starts: true,
            })
        }
        Tell::Nothing => None,
    }
}

/// 2025-11-25 `notifications/tasks/status`: the full task.
pub(super) fn status_notification(task: &Task) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/tasks/status",
        "params": shapes::core_task(task),
    })
}

/// 2025-11-25 `notifications/progress` for a progress message of a running
/// task (none for other changes).
pub(super) fn progress_notification(token: &ProgressToken, task: &Task) -> Option<Value> {
    let message = task.status_message.as_deref()?;
    (task.status == TaskStatus::Working).then(|| {
        json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {
                "progressToken": token.to_value(),
                "progress": crate::domain::progress_of(task),
                "message": message,
            },
        })
    })
}

/// Resolves when the client stopped listening for what is sent to it.
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
