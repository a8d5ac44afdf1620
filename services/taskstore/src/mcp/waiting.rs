//! Waiting for a task to end, as a synchronous `tools/call` and 2025-11-25
//! `tasks/result` both do: until it ended, the gateway stops, or the wait
//! runs out, and then what it ended with.

use serde_json::Value;

use super::gateway::Gateway;
use super::jsonrpc::{RpcError, code};
use crate::domain::{Scope, Task, TaskId, TaskResult};
use crate::error::StoreError;

/// How a wait for a task ended.
pub(super) enum Ending {
    /// With its stored result.
    Result(TaskResult),
    /// Ended without one (cancelled, or failed with nothing stored).
    WithoutResult(Task),
    /// Still running when the wait ran out.
    StillRunning(Task),
}

/// Waits up to the gateway's `max_wait` for `task_id` to end.
pub(super) async fn wait_for_end(
    gateway: &Gateway,
    scope: &Scope,
    task_id: &TaskId,
) -> Result<Ending, RpcError> {
    let waited = tokio::select! {
        waited = gateway.store.wait_for_result(scope, task_id, gateway.settings.max_wait) => waited,
        () = gateway.shutdown.cancelled() => Err(StoreError::Unavailable("the server is stopping".into())),
    };
    match waited {
        Ok(stored) => Ok(Ending::Result(stored)),
        // No result to give: ended without one, or not ended yet.
        Err(StoreError::FailedPrecondition(_)) => {
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
