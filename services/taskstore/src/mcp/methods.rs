//! Which method does what in each revision, who may call it, and the
//! lifecycle methods (`initialize`, `server/discover`, `ping`).

use std::sync::Arc;

use axum::body::Bytes;
use serde_json::{Map, Value, json};

use super::call::Call;
use super::errors::missing_extension;
use super::gateway::{Gateway, TASKS_EXTENSION};
use super::jsonrpc::{RpcError, code};
pub(super) use super::reply::{Body, Reply};
use super::{subscriptions, tasks, tools};
use crate::domain::{Caller, Operation, Revision, Role, SessionId, TaskId, may};

/// The session stream (`GET /mcp`), named as a method for the rights
/// table and the metrics.
pub(super) const SESSION_STREAM: &str = "GET /mcp";

/// Every method name this endpoint knows (in some revision).
const METHODS: [&str; 12] = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
    "tasks/update",
    "subscriptions/listen",
    "notifications/cancelled",
];

/// `method` as a metrics label: unknown names are `other`, so that clients
/// cannot grow the label set.
pub(super) fn metric_label(method: &str) -> &'static str {
    METHODS
        .into_iter()
        .find(|known| *known == method)
        .unwrap_or("other")
}

/// The operation each method amounts to: the caller's role must allow it
/// (the rights every edge is held to, `domain::access`).
fn operation_of(method: &str) -> Option<Operation> {
    Some(match method {
        "tools/list" => Operation::ReadTools,
        "tools/call" => Operation::CreateTask,
        "tasks/get" | "tasks/result" => Operation::ReadTask,
        "tasks/list" => Operation::ListTasks,
        "tasks/cancel" | "notifications/cancelled" => Operation::CancelTask,
        "tasks/update" => Operation::AnswerQuestions,
        // Following the caller's tasks, as gRPC WatchTasks does.
        SESSION_STREAM | "subscriptions/listen" => Operation::ListTasks,
        _ => return None,
    })
}

/// Whether `method` acts on tasks, so that a 2025-11-25 request of it must
/// name its session (the transport answers HTTP 400 without one).
pub(super) fn needs_session(method: &str) -> bool {
    operation_of(method).is_some()
}

/// Whether the caller may call `method`: its role's rights over the
/// task-store operation the method amounts to (the table gRPC callers are
/// held to). Workers run tasks; they never speak MCP, even where their
/// role may read a task over gRPC.
fn allowed(call: &Call, method: &str) -> bool {
    call.caller.role != Role::Worker
        && operation_of(method).is_none_or(|operation| may(&call.caller, operation))
}

/// Whether the caller may call `method`, as an error to answer if not.
pub(super) fn check_allowed(call: &Call, method: &str) -> Result<(), RpcError> {
    if allowed(call, method) {
        Ok(())
    } else {
        Err(not_allowed(&call.caller, method))
    }
}

/// The refusal of a method the caller's role may not call.
pub(super) fn not_allowed(caller: &Caller, method: &str) -> RpcError {
    RpcError::new(
        code::FORBIDDEN,
        format!("the {} role may not call {method}", caller.role),
    )
}

pub(super) async fn handle(
    gateway: &Arc<Gateway>,
    call: &Call,
    method: &str,
    params: Map<String, Value>,
    body: &Bytes,
) -> Result<Reply, RpcError> {
    use Revision::{V2025_11_25 as Core, V2026_07_28 as Extension};
    if !allowed(call, method) {
        return Err(not_allowed(&call.caller, method));
    }
    if call.revision == Extension && method.starts_with("tasks/") && !call.tasks_extension {
        return Err(missing_extension());
    }
    let result = match (call.revision, method) {
        (_, "ping") => json!({}),
        (Core, "initialize") => return initialize(&params),
        (Extension, "server/discover") => discover(),
        (_, "tools/list") => tools::list(gateway, call).await?,
        (_, "tools/call") => {
            let reply = tools::call(gateway, call, &params, body).await?;
            return Ok(reply.map_json(|result| with_result_type(call.revision, result)));
        }
        (_, "tasks/get") => tasks::get(gateway, call, &params).await?,
        (_, "tasks/cancel") => tasks::cancel(gateway, call, &params).await?,
        (Core, "tasks/result") => return tasks::result(gateway, call, &params).await,
        (Core, "tasks/list") => tasks::list(gateway, call, &params).await?,
        (Extension, "tasks/update") => tasks::update(gateway, call, &params).await?,
        (Extension, "subscriptions/listen") => {
            return Ok(Reply {
                body: Body::Stream(subscriptions::listen(gateway, call, &params).await?),
                session: None,
            });
        }
        _ => return Err(not_served(method, call.revision)),
    };
    Ok(with_result_type(call.revision, result).into())
}

/// The methods each revision serves here (besides `ping`).
const SERVED: [(Revision, &[&str]); 2] = [
    (
        Revision::V2025_11_25,
        &[
            "initialize",
            "tools/list",
            "tools/call",
            "tasks/get",
            "tasks/result",
            "tasks/list",
            "tasks/cancel",
        ],
    ),
    (
        Revision::V2026_07_28,
        &[
            "server/discover",
            "tools/list",
            "tools/call",
            "tasks/get",
            "tasks/update",
            "tasks/cancel",
            "subscriptions/listen",
        ],
    ),
];

/// Why `method` has no answer: it belongs to the other revision, or this
/// endpoint (tools and tasks only) does not serve it at all.
fn not_served(method: &str, revision: Revision) -> RpcError {
    let elsewhere = SERVED
        .iter()
        .find(|(other, methods)| *other != revision && methods.contains(&method));
    let message = match elsewhere {
        Some((other, _)) => format!(
            "method {method:?} belongs to protocol version {other}; this request is in {revision}"
        ),
        None => format!(
            "method {method:?} is not served: this endpoint serves tools and tasks only ({})",
            SERVED
                .iter()
                .find(|(served, _)| *served == revision)
                .map_or_else(String::new, |(_, methods)| methods.join(", "))
        ),
    };
    RpcError::new(code::METHOD_NOT_FOUND, message)
}

/// Notifications: only a client's cancellation of its own in-flight
/// request means anything here.
pub(super) fn notify(gateway: &Gateway, call: &Call, method: &str, params: &Map<String, Value>) {
    if method == "notifications/cancelled"
        && allowed(call, method)
        && let Some(request_id) = params.get("requestId")
    {
        tools::cancel_in_flight(gateway, call, request_id);
    }
}

/// 2026-07-28 results say what they are (`resultType`); a task handle
/// already says `task`.
fn with_result_type(revision: Revision, mut result: Value) -> Value {
    if revision == Revision::V2026_07_28
        && let Some(object) = result.as_object_mut()
    {
        object
            .entry("resultType")
            .or_insert_with(|| json!("complete"));
    }
    result
}

fn server_info() -> Value {
    json!({ "name": "taskstore", "title": "mcp-taskstore", "version": env!("CARGO_PKG_VERSION") })
}

const INSTRUCTIONS: &str = "Tools run on a durable worker fleet. Call long-running tools as tasks and poll them; tasks survive restarts of this server.";

/// The handshake. A client proposing 2026-07-28 (as rmcp's plain
/// `serve()` does) gets 2026-07-28 and the tasks extension, and no session:
/// from then on its requests carry the revision and its capabilities in
/// `_meta`, which is all a stateless server can go by (it cannot remember
/// what a handshake declared). Every other proposal gets 2025-11-25, the
/// handshake era's revision (the client decides whether to go on), and a
/// fresh session id that scopes its tasks.
fn initialize(params: &Map<String, Value>) -> Result<Reply, RpcError> {
    let proposed = params
        .get("protocolVersion")
        .ok_or_else(|| RpcError::invalid_params("initialize needs protocolVersion"))?;
    if proposed.as_str() == Some(Revision::V2026_07_28.as_str()) {
        return Ok(json!({
            "protocolVersion": Revision::V2026_07_28.as_str(),
            "capabilities": {
                "tools": { "listChanged": false },
                "extensions": { TASKS_EXTENSION: {} },
            },
            "serverInfo": server_info(),
            "instructions": INSTRUCTIONS,
        })
        .into());
    }
    let session = TaskId::generate()
        .ok()
        .and_then(|random| SessionId::parse(random.as_str(), 64).ok())
        .ok_or_else(|| RpcError::new(code::INTERNAL_ERROR, "no randomness for a session id"))?;
    Ok(Reply {
        body: Body::Json(json!({
            "protocolVersion": Revision::V2025_11_25.as_str(),
            "capabilities": {
                "tools": { "listChanged": false },
                "tasks": { "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } },
            },
            "serverInfo": server_info(),
            "instructions": INSTRUCTIONS,
        })),
        session: Some(session),
    })
}

/// 2026-07-28's discovery: the revision, the tasks extension, and that the
/// answer depends on the caller (tools differ by tenant's fleet: private).
fn discover() -> Value {
    json!({
        "supportedVersions": [Revision::V2026_07_28.as_str()],
        "capabilities": {
            "tools": { "listChanged": false },
            "extensions": { TASKS_EXTENSION: {} },
        },
        "instructions": INSTRUCTIONS,
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": { "io.modelcontextprotocol/serverInfo": server_info() },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unserved_methods_say_whether_another_revision_serves_them() {
        let core = not_served("resources/list", Revision::V2025_11_25);
        assert_eq!(core.code, code::METHOD_NOT_FOUND);
        assert!(
            core.message
                .contains("is not served: this endpoint serves tools and tasks only")
                && !core.message.contains("protocol version"),
            "{}",
            core.message
        );
        let other = not_served("tasks/update", Revision::V2025_11_25);
        assert!(
            other
                .message
                .contains("belongs to protocol version 2026-07-28"),
            "{}",
            other.message
        );
        let back = not_served("tasks/list", Revision::V2026_07_28);
        assert!(
            back.message
                .contains("belongs to protocol version 2025-11-25")
        );
    }
}
