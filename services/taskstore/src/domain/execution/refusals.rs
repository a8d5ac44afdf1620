//! Why a claim or a fenced report is refused, and the words the
//! execution protocol writes into tasks (status messages, the error
//! result), decided once for every backend.

use std::fmt;

use crate::domain::TaskStatus;

/// Why a claim was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimRefusal {
    Terminal(TaskStatus),
    NotDispatched,
    /// The job is of an older dispatch of the task.
    StaleJob,
    AlreadyClaimed,
    /// The state changed between the claim and this explanation (another
    /// claim won and already let go, say).
    NotNow,
}

impl ClaimRefusal {
    /// Why a claim that did not apply was refused, from the task as it is.
    /// (PostgreSQL decides the claim itself in one statement; this names
    /// the reason afterwards, the same way for every backend.)
    pub fn explain(
        status: TaskStatus,
        dispatched: bool,
        current_generation: bool,
        claimed: bool,
    ) -> Self {
        if status.is_terminal() {
            ClaimRefusal::Terminal(status)
        } else if !dispatched {
            ClaimRefusal::NotDispatched
        } else if !current_generation {
            ClaimRefusal::StaleJob
        } else if claimed {
            ClaimRefusal::AlreadyClaimed
        } else {
            ClaimRefusal::NotNow
        }
    }
}

impl fmt::Display for ClaimRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClaimRefusal::Terminal(status) => write!(f, "task is already {status}"),
            ClaimRefusal::NotDispatched => f.write_str("task is not dispatched to workers"),
            ClaimRefusal::StaleJob => f.write_str("stale job: the task was dispatched again since"),
            ClaimRefusal::AlreadyClaimed => {
                f.write_str("task is already claimed by another worker")
            }
            ClaimRefusal::NotNow => f.write_str("task cannot be claimed now"),
        }
    }
}

/// Why a report fenced by a lease (progress, result, release) was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceRefusal {
    /// Terminal statuses are final, whoever reports.
    Terminal(TaskStatus),
    /// The lease is not the task's current one.
    LeaseLost,
}

impl FenceRefusal {
    /// Why a fenced report that did not apply was refused, from the task's
    /// status now (terminal is final, so the answer cannot go stale).
    pub fn explain(status: TaskStatus) -> Self {
        if status.is_terminal() {
            FenceRefusal::Terminal(status)
        } else {
            FenceRefusal::LeaseLost
        }
    }
}

impl fmt::Display for FenceRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FenceRefusal::Terminal(status) => write!(f, "task is already {status}"),
            FenceRefusal::LeaseLost => f.write_str(
                "this attempt's lease is no longer current: the task was released or claimed again",
            ),
        }
    }
}

/// The status message of a claimed task. (PostgreSQL writes the same words
/// in its claim statement, where the attempt number is known.)
pub fn running_message(worker: &str, attempt: u32, max_attempts: u32) -> String {
    format!("running on {worker} (attempt {attempt} of {max_attempts})")
}

/// The status message of a task whose job no worker takes yet.
pub fn waiting_for_worker_message(tool: &str) -> String {
    format!("waiting for a worker that serves tool {tool}")
}

/// The `CallToolResult` of a task that failed outside its tool's control.
pub fn error_result(message: &str) -> String {
    taskstore_proto::protocol::error_result(message).to_string()
}
