//! The store's errors: a small closed set, one per gRPC code a client must
//! handle. Messages are safe to show a caller; backends log the underlying
//! cause (with its context) where they turn it into `Unavailable` or
//! `Internal`. The mapping to `tonic::Status` lives in `grpc::status`.

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
    /// The task's status does not allow the operation.
    #[error("{0}")]
    FailedPrecondition(String),
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
