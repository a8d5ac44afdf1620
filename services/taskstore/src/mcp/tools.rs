//! `tools/list` and `tools/call` over the fleet: the tools are those the
//! workers report now; a call becomes a dispatched task, answered at once
//! as a task or, when the client did not ask for one, waited for.

use std::sync::Arc;

use axum::body::Bytes;
use serde_json::{Map, Value, json};

use super::asking;
use super::call::Call;
use super::errors::{ended_without_result, missing_extension};
use super::gateway::Gateway;
use super::in_flight::CallKey;
use super::jsonrpc::{RpcError, code};
use super::reply::Reply;
use super::resume::{WaitKind, WaitPosition};
use super::shapes;
use super::streams::{Waiting, spawn_waiting};
use super::waiting::{Ending, Questions, Tell, result_json, wait_for_end};
use crate::domain::{
    CallMode, CallModeRefusal, DispatchRequest, IDEMPOTENCY_META_KEY, IdempotencyKey, JsonObject,
    NewTask, Priority, ProgressToken, Revision, ServedTool, StartTime, TaskId, ToolName, Ttl,
    TtlRequest, call_mode,
};
use crate::edge::WaitingSlot;
use crate::error::StoreError;

/// The tools served to the caller's tenant.
async fn served(gateway: &Gateway, call: &Call) -> Result<Vec<ServedTool>, StoreError> {
    gateway
        .served
        .served(
            gateway.operations.as_ref(),
            &gateway.fleet,
            &call.scope.tenant,
        )
        .await
}

pub(super) async fn list(gateway: &Gateway, call: &Call) -> Result<Value, RpcError> {
    let tools: Vec<Value> = served(gateway, call)
        .await?
        .iter()
        .map(|tool| shapes::tool(call.revision, &tool.description))
        .collect();
    Ok(json!({ "tools": tools }))
}

pub(super) async fn call(
    gateway: &Arc<Gateway>,
    call: &Call,
    params: &Map<String, Value>,
    body: &Bytes,
) -> Result<Reply, RpcError> {
    // 2026-07-28: a retry of a synchronous call that needed input (MRTR)
    // carries the answers and the state naming its task.
    if call.revision == Revision::V2026_07_28
        && let Some(state) = params.get("requestState")
    {
        let state = state
            .as_str()
            .ok_or_else(|| RpcError::invalid_params("params.requestState must be a string"))?;
        let task_id = asking::task_of_request_state(gateway, call, state)?;
        let answers = asking::answers_of(gateway, params.get("inputResponses"))?;
        asking::answer(gateway, &call.scope, &task_id, answers).await?;
        let _slot = gateway.admissions.hold_waiting(&call.scope.tenant)?;
        return Ok(run_to_end(gateway, call, task_id, Questions::EndTheWait)
            .await?
            .into());
    }
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("tools/call needs params.name"))?;
    let unknown =
        || RpcError::invalid_params(format!("unknown tool {name:?}: no worker serves it now"));
    let tool_name = ToolName::parse(name).map_err(|_| unknown())?;
    let tool = served(gateway, call)
        .await?
        .into_iter()
        .find(|tool| tool.name == tool_name)
        .ok_or_else(unknown)?;
    // Arguments its schema refuses never become a task.
    let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
    gateway
        .served
        .check_arguments(&tool.description, &arguments)
        .map_err(RpcError::invalid_params)?;
    let (mode, ttl) = decide_mode(call, params, &tool)?;
    let new_task = new_task(gateway, call, body, &tool, ttl)?;
    let progress = ProgressToken::of_request(&new_task.request);
    // A synchronous call holds a waiting slot; taken before the task
    // exists, so that a refused call starts nothing.
    let slot = match mode {
        CallMode::Synchronous => Some(gateway.admissions.hold_waiting(&call.scope.tenant)?),
        CallMode::Task => None,
    };
    gateway.admissions.admit_create(&call.scope.tenant)?;
    let task = gateway.store.create_task(&call.scope, new_task).await?;
    tracing::info!(
        task_id = %task.task_id,
        tool = %tool.name,
        revision = %call.revision,
        as_task = mode == CallMode::Task,
        "mcp tool call dispatched"
    );
    match (mode, call.revision) {
        (CallMode::Task, Revision::V2025_11_25) => {
            Ok(json!({ "task": shapes::core_task(&task) }).into())
        }
        (CallMode::Task, Revision::V2026_07_28) => {
            let mut handle = shapes::task(call.revision, &task, task.status.as_str());
            handle.insert("resultType".into(), json!("task"));
            Ok(Value::Object(handle).into())
        }
        // The task's questions (and progress) come on the response stream.
        (CallMode::Synchronous, Revision::V2025_11_25) => {
            let request_id = call.id.clone().ok_or_else(|| {
                RpcError::new(code::INVALID_REQUEST, "tools/call must be a request")
            })?;
            let position = WaitPosition {
                kind: WaitKind::ToolCall,
                task_id: task.task_id,
                request_id,
                seen: 0,
                progress,
            };
            Ok(call_wait(gateway.clone(), call.clone(), position, slot).into())
        }
        // The task's questions end the call with `input_required`.
        (CallMode::Synchronous, Revision::V2026_07_28) => {
            let result = run_to_end(gateway, call, task.task_id, Questions::EndTheWait).await;
            drop(slot);
            Ok(result?.into())
        }
    }
}

/// The wait of a 2025-11-25 synchronous call, from `position` (a new
/// call's, or a resumed stream's).
pub(super) fn call_wait(
    gateway: Arc<Gateway>,
    call: Call,
    position: WaitPosition,
    slot: Option<WaitingSlot>,
) -> Waiting {
    let task_id = position.task_id.clone();
    let (seen, progress) = (position.seen, position.progress.clone());
    spawn_waiting(position, move |outbox| async move {
        let _slot = slot;
        let questions = Questions::Send {
            to: &outbox,
            related: false,
            seen,
            tell: progress.map_or(Tell::Nothing, Tell::Progress),
        };
        run_to_end(&gateway, &call, task_id, questions).await
    })
}

/// As a task or not, and the retention asked for. 2025-11-25: the client
/// asks with `params.task`, and a tool's `taskSupport` may refuse (-32601,
/// as the spec says). 2026-07-28: the server decides; a client with the
/// tasks extension gets a task unless the tool forbids one.
fn decide_mode(
    call: &Call,
    params: &Map<String, Value>,
    tool: &ServedTool,
) -> Result<(CallMode, TtlRequest), RpcError> {
    let support = tool.description.task_support;
    match call.revision {
        Revision::V2025_11_25 => {
            let task = match params.get("task") {
                None => None,
                Some(Value::Object(task)) => Some(task),
                Some(_) => return Err(RpcError::invalid_params("params.task must be an object")),
            };
            let ttl = match task.and_then(|t| t.get("ttl")) {
                None => TtlRequest::ServerDefault,
                Some(Value::Null) => TtlRequest::Unlimited,
                Some(raw) => raw
                    .as_u64()
                    .and_then(|ms| Ttl::from_millis(ms).ok())
                    .map(TtlRequest::Of)
                    .ok_or_else(|| {
                        RpcError::invalid_params("params.task.ttl must be milliseconds or null")
                    })?,
            };
            let mode = call_mode(support, task.is_some()).map_err(|refusal| {
                RpcError::new(
                    code::METHOD_NOT_FOUND,
                    format!("tool {}: {refusal}", tool.name),
                )
            })?;
            Ok((mode, ttl))
        }
        Revision::V2026_07_28 => {
            let mode = match call_mode(support, call.tasks_extension) {
                Ok(mode) => mode,
                // The server decides in this revision: a tool that cannot
                // run as a task runs synchronously for every client.
                Err(CallModeRefusal::TaskForbidden) => CallMode::Synchronous,
                Err(CallModeRefusal::TaskRequired) => return Err(missing_extension()),
            };
            Ok((mode, TtlRequest::ServerDefault))
        }
    }
}

/// The task a call becomes: the request stored as sent (its id too), run
/// on a worker serving the tool.
fn new_task(
    gateway: &Gateway,
    call: &Call,
    body: &Bytes,
    tool: &ServedTool,
    ttl: TtlRequest,
) -> Result<NewTask, RpcError> {
    let max = gateway.limits.max_json_bytes;
    if body.len() > max {
        return Err(RpcError::invalid_params(format!(
            "the request is larger than {max} bytes"
        )));
    }
    let text = std::str::from_utf8(body)
        .map_err(|_| RpcError::invalid_params("the request is not UTF-8"))?;
    let request = JsonObject::parse(text).map_err(|err| RpcError::invalid_params(err.0))?;
    request
        .check_tools_call_arguments()
        .map_err(|err| RpcError::invalid_params(err.to_string()))?;
    let id = call
        .id
        .as_ref()
        .ok_or_else(|| RpcError::new(code::INVALID_REQUEST, "tools/call must be a request"))?;
    let request_id = crate::domain::RequestId::parse(id.as_json().to_string())
        .map_err(|err| RpcError::invalid_params(format!("id {err}")))?;
    // Read once for both: the request may be up to a megabyte of text.
    let meta = request.params_meta();
    let idempotency_key = IdempotencyKey::of_meta(meta.as_ref()).map_err(|err| {
        RpcError::invalid_params(format!("params._meta[\"{IDEMPOTENCY_META_KEY}\"] {err}"))
    })?;
    let start = StartTime::of_meta(meta.as_ref()).map_err(RpcError::invalid_params)?;
    // The tenant's cap is the store's to apply; here only the range.
    let priority = Priority::of_meta(meta.as_ref(), Priority::MAX)
        .map_err(RpcError::invalid_params)?
        .unwrap_or_default();
    let mut dispatch = DispatchRequest {
        fairness: None,
        rate: None,
        concurrency: None,
        tool: tool.name.clone(),
        max_attempts: None,
        start,
        retry: Default::default(),
        priority,
    };
    tool.description.apply_to(&mut dispatch);
    Ok(NewTask {
        task_id: None,
        ttl,
        poll_interval: None,
        request_id,
        request,
        dispatch: Some(dispatch),
        trace_context: None,
        idempotency_key,
    })
}

/// Waits for the task of a synchronous call and answers with its result,
/// or (2026-07-28) with `input_required` when it asks. The call owns the
/// task: abandoned, it cancels it (`in_flight.rs`); one that waits for
/// input is not abandoned (its client comes back with the answers).
async fn run_to_end(
    gateway: &Gateway,
    call: &Call,
    task_id: TaskId,
    questions: Questions<'_>,
) -> Result<Value, RpcError> {
    let mut guard = gateway.in_flight.start(
        call_key(call, call.id.as_ref().map(|id| id.as_json())),
        &call.scope,
        &task_id,
        gateway.store.clone(),
    );
    let outbox = match &questions {
        Questions::Send { to, .. } => Some((*to).clone()),
        Questions::EndTheWait => None,
    };
    let ending = wait_for_end(gateway, &call.scope, &task_id, questions).await;
    // A stream the client can resume elsewhere is handed over, not
    // abandoned: its task goes on.
    if ending.is_err() && outbox.is_some_and(|outbox| outbox.handed_over()) {
        guard.finished();
    }
    match ending? {
        Ending::Result(stored) => {
            guard.finished();
            result_json(&stored)
        }
        Ending::WithoutResult(task) => {
            guard.finished();
            Err(ended_without_result(&task))
        }
        Ending::NeedsInput(open) => {
            guard.finished();
            Ok(json!({
                "resultType": "input_required",
                "inputRequests": asking::input_requests(&open),
                "requestState": asking::request_state(gateway, call, &task_id),
            }))
        }
        // The guard cancels it.
        Ending::StillRunning(_) => Err(RpcError::new(
            code::INTERNAL_ERROR,
            format!(
                "the tool ran longer than {} s; its task is cancelled (call it as a task to wait longer)",
                gateway.settings.max_wait.as_secs()
            ),
        )),
    }
}

/// The key of a request of this caller (`request_id` as JSON).
fn call_key(call: &Call, request_id: Option<&Value>) -> CallKey {
    CallKey::new(
        &call.caller.subject,
        call.revision,
        &call.scope,
        &request_id.map(Value::to_string).unwrap_or_default(),
    )
}

/// The client cancelled a request of its own: if it is a synchronous call
/// running here, cancel its task.
pub(super) fn cancel_in_flight(gateway: &Gateway, call: &Call, request_id: &Value) {
    gateway
        .in_flight
        .cancel(&call_key(call, Some(request_id)), gateway.store.clone());
}
