//! The one mapping between store errors and gRPC status codes, both ways.

use tonic::{Code, Status};

use crate::error::StoreError;

/// Server side. Exhaustive on purpose: a new variant must choose its code.
impl From<StoreError> for Status {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::InvalidArgument(message) => Status::invalid_argument(message),
            StoreError::NotFound => Status::not_found(StoreError::NotFound.to_string()),
            err @ StoreError::AlreadyExists(_) => Status::already_exists(err.to_string()),
            StoreError::FailedPrecondition(message) => Status::failed_precondition(message),
            StoreError::ResourceExhausted(message) => Status::resource_exhausted(message),
            StoreError::Unauthenticated(message) => Status::unauthenticated(message),
            StoreError::PermissionDenied(message) => Status::permission_denied(message),
            // Backends log the cause; the message is already safe to show.
            StoreError::Unavailable(message) => Status::unavailable(message),
            StoreError::Internal(message) => Status::internal(message),
        }
    }
}

/// Client side: a status from the server, as the store error it stands for.
pub fn store_error_from_status(status: Status) -> StoreError {
    let message = status.message().to_owned();
    match status.code() {
        Code::InvalidArgument | Code::OutOfRange => StoreError::InvalidArgument(message),
        Code::NotFound => StoreError::NotFound,
        Code::AlreadyExists => StoreError::AlreadyExists(message),
        Code::FailedPrecondition => StoreError::FailedPrecondition(message),
        Code::ResourceExhausted => StoreError::ResourceExhausted(message),
        Code::Unavailable | Code::DeadlineExceeded | Code::Aborted => {
            StoreError::Unavailable(message)
        }
        Code::Unauthenticated => StoreError::Unauthenticated(message),
        Code::PermissionDenied => StoreError::PermissionDenied(message),
        Code::Ok
        | Code::Cancelled
        | Code::Unknown
        | Code::Unimplemented
        | Code::Internal
        | Code::DataLoss => StoreError::Internal(format!("{:?}: {message}", status.code())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_errors() -> Vec<(StoreError, Code)> {
        vec![
            (
                StoreError::InvalidArgument("x".into()),
                Code::InvalidArgument,
            ),
            (StoreError::NotFound, Code::NotFound),
            (StoreError::AlreadyExists("t".into()), Code::AlreadyExists),
            (
                StoreError::FailedPrecondition("x".into()),
                Code::FailedPrecondition,
            ),
            (
                StoreError::ResourceExhausted("x".into()),
                Code::ResourceExhausted,
            ),
            (StoreError::Unavailable("x".into()), Code::Unavailable),
            (
                StoreError::Unauthenticated("x".into()),
                Code::Unauthenticated,
            ),
            (
                StoreError::PermissionDenied("x".into()),
                Code::PermissionDenied,
            ),
            (
                StoreError::Internal("database error".into()),
                Code::Internal,
            ),
        ]
    }

    #[test]
    fn every_error_has_its_code_and_survives_the_round_trip_in_kind() {
        for (err, code) in all_errors() {
            let status = Status::from(err.clone());
            assert_eq!(status.code(), code, "{err:?}");
            let back = store_error_from_status(status);
            assert_eq!(std::mem::discriminant(&back), std::mem::discriminant(&err));
        }
    }

    #[test]
    fn not_found_has_one_message() {
        assert_eq!(
            Status::from(StoreError::NotFound).message(),
            "task not found"
        );
    }
}
