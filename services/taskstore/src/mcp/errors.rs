//! Store errors as JSON-RPC errors, in one exhaustive place. MCP asks for
//! -32602 for an unknown (or expired, or another session's) task and a bad
//! cursor; the rest use this server's codes (`jsonrpc::code`). Internal
//! details stay in the server log.

use serde_json::json;

use super::gateway::TASKS_EXTENSION;
use super::jsonrpc::{RpcError, code};
use crate::domain::{Revision, RevisionRefusal, Task, TaskStatus};
use crate::edge::AdmissionRefused;
use crate::error::StoreError;

impl From<StoreError> for RpcError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::InvalidArgument(message) => RpcError::invalid_params(message),
            StoreError::NotFound => RpcError::invalid_params("task not found"),
            StoreError::AlreadyExists(id) => {
                RpcError::invalid_params(format!("task {id} already exists"))
            }
            StoreError::FailedPrecondition(refusal) => {
                RpcError::invalid_params(refusal.to_string())
            }
            StoreError::ResourceExhausted(message) => {
                RpcError::new(code::RESOURCE_EXHAUSTED, message)
            }
            StoreError::Unauthenticated(message) => RpcError::new(code::INVALID_REQUEST, message),
            StoreError::PermissionDenied(message) => RpcError::new(code::FORBIDDEN, message),
            StoreError::Unavailable(message) => {
                RpcError::new(code::UNAVAILABLE, format!("unavailable: {message}; retry"))
            }
            StoreError::Internal(_) => {
                RpcError::new(code::INTERNAL_ERROR, "internal error (see the server log)")
            }
        }
    }
}

/// An admission refusal (shared with the gRPC port of the replica): a rate
/// or a waiting-call limit, with when to retry when that is known.
impl From<AdmissionRefused> for RpcError {
    fn from(refused: AdmissionRefused) -> Self {
        let error = RpcError::new(code::RESOURCE_EXHAUSTED, refused.message);
        match refused.retry_after {
            Some(wait) => error.with_data(
                json!({ "retryAfterMs": u64::try_from(wait.as_millis()).unwrap_or(u64::MAX) }),
            ),
            None => error,
        }
    }
}

/// A 2026-07-28 request that needs the tasks extension its client did not
/// declare.
pub(super) fn missing_extension() -> RpcError {
    RpcError::new(
        code::MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!("this request needs the client capability extensions[\"{TASKS_EXTENSION}\"]"),
    )
    .with_data(json!({ "requiredCapabilities": { "extensions": { TASKS_EXTENSION: {} } } }))
}

/// What a call that waited for a task answers when the task ended without
/// a result: cancelled, or failed with nothing stored (its last status
/// message says why).
pub(super) fn ended_without_result(task: &Task) -> RpcError {
    let message = match task.status {
        TaskStatus::Cancelled => "the task was cancelled".to_owned(),
        _ => task
            .status_message
            .clone()
            .unwrap_or_else(|| "the task ended without a result".to_owned()),
    };
    RpcError::new(code::INTERNAL_ERROR, message)
}

/// A request whose protocol revision is not accepted, with the HTTP status
/// the transport prescribes.
pub(super) fn revision_refused(refusal: RevisionRefusal) -> (http::StatusCode, RpcError) {
    use http::StatusCode;
    match refusal {
        RevisionRefusal::Unsupported(named) => (
            StatusCode::OK,
            RpcError::new(
                code::UNSUPPORTED_PROTOCOL_VERSION,
                format!("protocol version {named:?} is not supported"),
            )
            .with_data(json!({
                "supported": [Revision::V2026_07_28.as_str()],
                "requested": named,
            })),
        ),
        RevisionRefusal::HeaderMismatch => (
            StatusCode::BAD_REQUEST,
            RpcError::new(
                code::HEADER_MISMATCH,
                "the MCP-Protocol-Version header and _meta disagree",
            ),
        ),
        RevisionRefusal::BadHeader(header) => (
            StatusCode::BAD_REQUEST,
            RpcError::new(
                code::INVALID_REQUEST,
                format!("unsupported MCP-Protocol-Version {header:?}"),
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn admission_refusals_say_when_to_retry_when_known() {
        let rate = RpcError::from(AdmissionRefused {
            message: "too many creates".into(),
            retry_after: Some(Duration::from_millis(250)),
        });
        assert_eq!(rate.code, code::RESOURCE_EXHAUSTED);
        assert_eq!(rate.data, Some(json!({ "retryAfterMs": 250 })));
        let waiting = RpcError::from(AdmissionRefused {
            message: "too many waiting calls".into(),
            retry_after: None,
        });
        assert_eq!(
            (waiting.code, waiting.data),
            (code::RESOURCE_EXHAUSTED, None)
        );
    }
}
