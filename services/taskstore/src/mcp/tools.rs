//! `tools/list` and `tools/call` over the fleet: the tools are those the
//! workers report now; a call becomes a dispatched task, answered at once
//! as a task or, when the client did not ask for one, waited for.

use std::sync::Arc;

use axum::body::Bytes;
use serde_json::{Map, Value, json};

use super::call::Call;
use super::errors::{ended_without_result, missing_extension};
use super::gateway::Gateway;
use super::in_flight::CallKey;
use super::jsonrpc::{RpcError, code};
use super::shapes;
use super::waiting::{Ending, result_json, wait_for_end};
use crate::domain::{
    CallMode, CallModeRefusal, DispatchRequest, JsonObject, NewTask, Revision, ServedTool, Task,
    ToolName, Ttl, TtlRequest, call_mode,
};
use crate::error::StoreError;

async fn served(gateway: &Gateway) -> Result<Arc<Vec<ServedTool>>, StoreError> {
    gateway
        .served
        .get(gateway.operations.as_ref(), &gateway.fleet)
        .await
}

pub(super) async fn list(gateway: &Gateway, call: &Call) -> Result<Value, RpcError> {
    let tools: Vec<Value> = served(gateway)
        .await?
        .iter()
        .map(|tool| shapes::tool(call.revision, &tool.description))
        .collect();
    Ok(json!({ "tools": tools }))
}

pub(super) async fn call(
    gateway: &Gateway,
    call: &Call,
    params: &Map<String, Value>,
    body: &Bytes,
) -> Result<Value, RpcError> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("tools/call needs params.name"))?;
    let unknown =
        || RpcError::invalid_params(format!("unknown tool {name:?}: no worker serves it now"));
    let tool_name = ToolName::parse(name).map_err(|_| unknown())?;
    let tool = served(gateway)
        .await?
        .iter()
        .find(|tool| tool.name == tool_name)
        .cloned()
        .ok_or_else(unknown)?;
    let (mode, ttl) = decide_mode(call, params, &tool)?;
    let new_task = new_task(gateway, call, body, tool_name, ttl)?;
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
    match mode {
        CallMode::Task => Ok(match call.revision {
            Revision::V2025_11_25 => json!({ "task": shapes::core_task(&task) }),
            Revision::V2026_07_28 => {
                let mut handle = shapes::task(call.revision, &task, task.status.as_str());
                handle.insert("resultType".into(), json!("task"));
                Value::Object(handle)
            }
        }),
        CallMode::Synchronous => {
            let result = run_to_end(gateway, call, task).await;
            drop(slot);
            result
        }
    }
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
    tool: ToolName,
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
    Ok(NewTask {
        task_id: None,
        ttl,
        poll_interval: None,
        request_id,
        request,
        dispatch: Some(DispatchRequest {
            tool,
            max_attempts: None,
        }),
        trace_context: None,
    })
}

/// Waits for the task of a synchronous call and answers with its result.
/// The call owns the task: abandoned, it cancels it (`in_flight.rs`).
async fn run_to_end(gateway: &Gateway, call: &Call, task: Task) -> Result<Value, RpcError> {
    let mut guard = gateway.in_flight.start(
        call_key(call, call.id.as_ref().map(|id| id.as_json())),
        &call.scope,
        &task.task_id,
        gateway.store.clone(),
    );
    match wait_for_end(gateway, &call.scope, &task.task_id).await? {
        Ending::Result(stored) => {
            guard.finished();
            result_json(&stored)
        }
        Ending::WithoutResult(task) => {
            guard.finished();
            Err(ended_without_result(&task))
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
