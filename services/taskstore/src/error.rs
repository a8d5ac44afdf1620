//! The store's errors: a small closed set, one per gRPC code a client must
//! handle. Messages are safe to show a caller; backends log the underlying
//! cause (with its context) where they turn it into `Unavailable` or
//! `Internal`. The mapping to `tonic::Status` lives in `grpc::status`.

use crate::domain::{ClaimRefusal, FenceRefusal, HoldRefusal, QuestionRefusal, TaskStatus};

/// An error from a [`crate::store::TaskStore`] operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The request is malformed; retrying it unchanged cannot succeed.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// No such task is visible to the caller: missing, expired, or another
    /// session's. One message for all three, so existence never leaks.
    #[error("task not found")]
    NotFound,
    /// A caller-supplied task id is in use.
    #[error("task {0} already exists")]
    AlreadyExists(String),
    /// The task's state does not allow the operation; [`Refusal`] says
    /// why, typed, so that callers branch on what happened, not on words.
    #[error("{0}")]
    FailedPrecondition(Refusal),
    /// A quota is reached.
    #[error("{0}")]
    ResourceExhausted(String),
    /// The caller's credentials are missing or not accepted.
    #[error("{0}")]
    Unauthenticated(String),
    /// The caller's role or tenant does not allow the operation.
    #[error("{0}")]
    PermissionDenied(String),
    /// A dependency (the database) is unreachable; safe to retry.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// A bug or an unexpected failure; the details are in the server log.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Why a task's state refused an operation. The gRPC edge sends the kind
/// with the words (`grpc::status`), so a remote store's caller gets the same
/// value back as a local one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A stale or duplicated job's claim.
    #[error("{0}")]
    Claim(ClaimRefusal),
    /// A report of an attempt that no longer holds the task, or of a
    /// task that is terminal.
    #[error("{0}")]
    Fence(FenceRefusal),
    /// GetTaskResult on a task that has no result to give.
    #[error("{}", no_result_words(*.0))]
    NoResult(TaskStatus),
    /// A question the task's questions do not allow.
    #[error("{0}")]
    Question(QuestionRefusal),
    /// A hold the task's state does not allow.
    #[error("{0}")]
    Hold(HoldRefusal),
    /// An idempotency key that names another call's task (other arguments,
    /// another tool, another session's task): never that task.
    #[error("the idempotency key was already used for another request")]
    IdempotencyKeyInUse,
    /// A refusal of a remote service that named no kind this build knows
    /// (an older or newer service): its words only.
    #[error("{0}")]
    Unexplained(String),
}

fn no_result_words(status: TaskStatus) -> String {
    match status {
        TaskStatus::Working | TaskStatus::InputRequired => {
            format!("task is still {status}; its result is not ready")
        }
        TaskStatus::Cancelled => "task was cancelled; it has no result".to_owned(),
        TaskStatus::Completed | TaskStatus::Failed => {
            format!("task is {status} but ended without a stored result")
        }
    }
}

impl From<Refusal> for StoreError {
    fn from(refusal: Refusal) -> Self {
        StoreError::FailedPrecondition(refusal)
    }
}

/// A refused claim: the job is stale, drop it.
impl From<ClaimRefusal> for StoreError {
    fn from(refusal: ClaimRefusal) -> Self {
        StoreError::FailedPrecondition(Refusal::Claim(refusal))
    }
}

/// A refused fenced report: the attempt lost the task.
impl From<FenceRefusal> for StoreError {
    fn from(refusal: FenceRefusal) -> Self {
        StoreError::FailedPrecondition(Refusal::Fence(refusal))
    }
}

impl From<QuestionRefusal> for StoreError {
    fn from(refusal: QuestionRefusal) -> Self {
        StoreError::FailedPrecondition(Refusal::Question(refusal))
    }
}

impl StoreError {
    pub fn invalid(field: &str, reason: impl std::fmt::Display) -> Self {
        StoreError::InvalidArgument(format!("{field} {reason}"))
    }
}

impl From<crate::domain::InvalidCursor> for StoreError {
    fn from(err: crate::domain::InvalidCursor) -> Self {
        StoreError::invalid("cursor", err)
    }
}
