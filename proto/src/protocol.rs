//! What the service and every worker say the same way, written once: why
//! an attempt must stop (the words of `RenewLeaseResponse.reason` and of
//! the workers' logs), and the `CallToolResult` of a task that failed
//! outside its tool. Workers in other languages copy these texts from
//! `docs/execution.md`, which quotes them.

use serde_json::{Value, json};

/// The task was cancelled.
pub const STOP_CANCELLED: &str = "the task was cancelled";
/// The task completed or failed without this attempt.
pub const STOP_FINISHED: &str = "the task finished without this attempt";
/// The task expired or was deleted.
pub const STOP_GONE: &str = "the task no longer exists (expired or deleted)";
/// Another claim (or none) holds the task now.
pub const STOP_LEASE_LOST: &str = "the lease was lost: the task was dispatched again";

/// The `domain` of the ErrorInfo in the service's FAILED_PRECONDITION
/// refusals; its `reason` names the refusal's kind (the service names
/// every kind; these are the ones a worker acts on).
pub const REFUSAL_DOMAIN: &str = "mcp-taskstore";
/// A report under a lease, refused because the task is terminal.
pub const REFUSED_TERMINAL: &str = "FENCE_TERMINAL";
/// A report under a lease that is not the task's current one.
pub const REFUSED_LEASE_LOST: &str = "FENCE_LEASE_LOST";
/// The ErrorInfo metadata key naming the task's status, where a refusal
/// carries it.
pub const REFUSAL_STATUS_KEY: &str = "status";

impl crate::v1::StopReason {
    /// The words for this reason (`UNSPECIFIED`: the service said stop
    /// without a reason this build knows).
    pub fn describe(self) -> &'static str {
        match self {
            Self::Cancelled => STOP_CANCELLED,
            Self::Finished => STOP_FINISHED,
            Self::Gone => STOP_GONE,
            Self::LeaseLost => STOP_LEASE_LOST,
            Self::Unspecified => "the service said to stop",
        }
    }
}

/// A `CallToolResult` with one text item and `isError: true`: what a task
/// that failed outside its tool's control (a crash, a timeout, its
/// attempts used up) ends with.
pub fn error_result(text: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": text }], "isError": true })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_result_is_one_text_item() {
        assert_eq!(
            error_result("boom").to_string(),
            r#"{"content":[{"text":"boom","type":"text"}],"isError":true}"#
        );
        assert_eq!(
            crate::v1::StopReason::Cancelled.describe(),
            "the task was cancelled"
        );
    }
}
