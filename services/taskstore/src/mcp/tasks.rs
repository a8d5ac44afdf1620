//! `tasks/*` over the store, per revision. Every lookup is in the caller's
//! scope (tenant, and session in 2025-11-25): another's task is "not found"
//! (-32602), exactly like a missing one.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::asking;
use super::call::Call;
use super::errors::ended_without_result;
use super::gateway::Gateway;
use super::jsonrpc::{RpcError, code};
use super::reply::Reply;
use super::resume::{WaitKind, WaitPosition};
use super::shapes;
use super::streams::{Waiting, spawn_waiting};
use super::waiting::{Ending, Questions, Tell, result_json, wait_for_end};
use crate::domain::{ExtensionOutcome, PageRequest, Revision, Scope, Task, TaskId, TaskStatus};
use crate::edge::WaitingSlot;
use crate::error::StoreError;

fn task_id(params: &Map<String, Value>) -> Result<TaskId, RpcError> {
    let raw = params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("params.taskId must be a string"))?;
    // A malformed id cannot name a task: the same answer as a missing one.
    TaskId::parse(raw).map_err(|_| StoreError::NotFound.into())
}

pub(super) async fn get(
    gateway: &Gateway,
    call: &Call,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let id = task_id(params)?;
    let task = gateway.store.get_task(&call.scope, &id).await?;
    match call.revision {
        Revision::V2025_11_25 => Ok(shapes::core_task(&task)),
        Revision::V2026_07_28 => detailed(gateway, call, task).await,
    }
}

/// SEP-2663's `DetailedTask`: the task with its result (or error, or input
/// requests) inlined.
pub(super) async fn detailed(
    gateway: &Gateway,
    call: &Call,
    task: Task,
) -> Result<Value, RpcError> {
    let stored = match task.status {
        TaskStatus::Completed | TaskStatus::Failed => {
            match gateway.store.get_result(&call.scope, &task.task_id).await {
                Ok(stored) => Some(stored),
                Err(StoreError::FailedPrecondition(_)) => None,
                Err(err) => return Err(err.into()),
            }
        }
        _ => None,
    };
    let task = stored.as_ref().map_or(task, |stored| stored.task.clone());
    let outcome = ExtensionOutcome::of(task.status, stored.is_some());
    let mut object = shapes::task(call.revision, &task, outcome.as_str());
    match (outcome, &stored) {
        (ExtensionOutcome::Completed, Some(stored)) => {
            object.insert("result".into(), result_json(stored)?);
        }
        (ExtensionOutcome::Failed, _) | (ExtensionOutcome::Completed, None) => {
            object.insert("error".into(), ended_without_result(&task).to_json());
        }
        // Every outstanding request, under its key (SEP-2663: MUST).
        (ExtensionOutcome::InputRequired, _) => {
            let questions = gateway.store.questions(&call.scope, &task.task_id).await?;
            object.insert("inputRequests".into(), asking::input_requests(&questions));
        }
        (ExtensionOutcome::Working | ExtensionOutcome::Cancelled, _) => {}
    }
    Ok(Value::Object(object))
}

pub(super) async fn cancel(
    gateway: &Gateway,
    call: &Call,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let id = task_id(params)?;
    match call.revision {
        // 2025-11-25 refuses to cancel a task that already ended (the
        // store's cancel answers such a task unchanged).
        Revision::V2025_11_25 => {
            let already = |status: TaskStatus| {
                RpcError::invalid_params(format!(
                    "task is already {status}; it cannot be cancelled"
                ))
            };
            let before = gateway.store.get_task(&call.scope, &id).await?;
            if before.status.is_terminal() {
                return Err(already(before.status));
            }
            let after = gateway.store.cancel_task(&call.scope, &id).await?;
            // It may have ended between the two calls.
            if after.status != TaskStatus::Cancelled {
                return Err(already(after.status));
            }
            Ok(shapes::core_task(&after))
        }
        // 2026-07-28: an acknowledgement; the state shows in `tasks/get`.
        Revision::V2026_07_28 => {
            gateway.store.cancel_task(&call.scope, &id).await?;
            Ok(json!({}))
        }
    }
}

/// 2025-11-25 `tasks/result`: waits until the task ends, then answers what
/// the call would have (the stored `CallToolResult`, tied to its task).
/// Questions the task asks meanwhile come first on the response stream.
pub(super) async fn result(
    gateway: &Arc<Gateway>,
    call: &Call,
    params: &Map<String, Value>,
) -> Result<Reply, RpcError> {
    let id = task_id(params)?;
    let request_id = call
        .id
        .clone()
        .ok_or_else(|| RpcError::new(code::INVALID_REQUEST, "tasks/result must be a request"))?;
    let slot = gateway.admissions.hold_waiting(&call.scope.tenant)?;
    // Not found answers at once, before anything is streamed.
    gateway.store.get_task(&call.scope, &id).await?;
    let position = WaitPosition {
        kind: WaitKind::TasksResult,
        task_id: id,
        request_id,
        seen: 0,
        progress: None,
    };
    Ok(result_wait(gateway.clone(), call.scope.clone(), position, slot).into())
}

/// The wait of a `tasks/result`, from `position` (a new request's, or a
/// resumed stream's).
pub(super) fn result_wait(
    gateway: Arc<Gateway>,
    scope: Scope,
    position: WaitPosition,
    slot: WaitingSlot,
) -> Waiting {
    let (id, seen) = (position.task_id.clone(), position.seen);
    spawn_waiting(position, move |outbox| async move {
        let _slot = slot;
        let questions = Questions::Send {
            to: &outbox,
            related: true,
            seen,
            tell: Tell::Status,
        };
        match wait_for_end(&gateway, &scope, &id, questions).await? {
            Ending::Result(stored) => {
                Ok(shapes::result_of_task(result_json(&stored)?, &stored.task))
            }
            Ending::WithoutResult(task) => Err(ended_without_result(&task)),
            Ending::StillRunning(task) => Err(still(&gateway, &task)),
            // Only a wait told to end at a question ends there; not this one.
            Ending::NeedsInput(_) => Err(RpcError::new(
                code::INTERNAL_ERROR,
                "the wait ended at a question",
            )),
        }
    })
}

fn still(gateway: &Gateway, task: &Task) -> RpcError {
    RpcError::new(
        code::INTERNAL_ERROR,
        format!(
            "the task is still {} after {} s; call tasks/result again",
            task.status,
            gateway.settings.max_wait.as_secs()
        ),
    )
}

pub(super) async fn list(
    gateway: &Gateway,
    call: &Call,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let cursor = match params.get("cursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(cursor)) => Some(cursor.clone()),
        Some(_) => return Err(RpcError::invalid_params("params.cursor must be a string")),
    };
    let page = gateway
        .store
        .list_tasks(
            &call.scope,
            PageRequest {
                cursor,
                ..PageRequest::default()
            },
        )
        .await?;
    let tasks: Vec<Value> = page.tasks.iter().map(shapes::core_task).collect();
    let mut answer = json!({ "tasks": tasks });
    if let (Some(next), Some(object)) = (page.next_cursor, answer.as_object_mut()) {
        object.insert("nextCursor".into(), json!(next));
    }
    Ok(answer)
}

/// 2026-07-28 `tasks/update`: stores `inputResponses`; an empty
/// acknowledgement (eventually consistent: answers to unknown or answered
/// keys, or to a task that ended, are ignored; an unknown task is not).
pub(super) async fn update(
    gateway: &Gateway,
    call: &Call,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let id = task_id(params)?;
    let answers = asking::answers_of(gateway, params.get("inputResponses"))?;
    asking::answer(gateway, &call.scope, &id, answers).await?;
    Ok(json!({}))
}
