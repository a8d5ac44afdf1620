//! The one mapping between store errors and gRPC status codes, both ways.

use std::collections::HashMap;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt as _};

use crate::domain::{ClaimRefusal, FenceRefusal, HoldRefusal, QuestionRefusal, TaskStatus};
use crate::edge::{AdmissionRefused, ShuttingDown};
use crate::error::{Refusal, StoreError};

use taskstore_proto::protocol::{
    REFUSAL_DOMAIN as ERROR_DOMAIN, REFUSAL_STATUS_KEY, REFUSED_LEASE_LOST, REFUSED_TERMINAL,
};

/// Server side. Exhaustive on purpose: a new variant must choose its code.
impl From<StoreError> for Status {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::InvalidArgument(message) => Status::invalid_argument(message),
            StoreError::NotFound => Status::not_found(StoreError::NotFound.to_string()),
            err @ StoreError::AlreadyExists(_) => Status::already_exists(err.to_string()),
            StoreError::FailedPrecondition(refusal) => {
                let (reason, metadata) = refusal_reason(&refusal);
                Status::with_error_details(
                    Code::FailedPrecondition,
                    refusal.to_string(),
                    ErrorDetails::with_error_info(reason, ERROR_DOMAIN, metadata),
                )
            }
            StoreError::ResourceExhausted(message) => Status::resource_exhausted(message),
            StoreError::Unauthenticated(message) => Status::unauthenticated(message),
            StoreError::PermissionDenied(message) => Status::permission_denied(message),
            // Backends log the cause; the message is already safe to show.
            StoreError::Unavailable(message) => Status::unavailable(message),
            StoreError::Internal(message) => Status::internal(message),
        }
    }
}

/// RESOURCE_EXHAUSTED, with a RetryInfo detail when trying again later may
/// succeed (a rate refusal says when; a waiting-call refusal cannot know).
impl From<AdmissionRefused> for Status {
    fn from(refused: AdmissionRefused) -> Self {
        match refused.retry_after {
            Some(wait) => Status::with_error_details(
                Code::ResourceExhausted,
                refused.message,
                ErrorDetails::with_retry_info(Some(wait)),
            ),
            None => Status::resource_exhausted(refused.message),
        }
    }
}

/// UNAVAILABLE: retrying reaches another replica, or this one restarted.
impl From<ShuttingDown> for Status {
    fn from(stopping: ShuttingDown) -> Self {
        Status::unavailable(stopping.to_string())
    }
}

/// Client side: a status from the server, as the store error it stands for.
pub fn store_error_from_status(status: Status) -> StoreError {
    if taskstore_proto::endpoint::answered_by_no_grpc_service(&status) {
        return StoreError::Unavailable(format!(
            "{} ({})",
            taskstore_proto::endpoint::NOT_THE_GRPC_API,
            status.message()
        ));
    }
    let message = status.message().to_owned();
    match status.code() {
        Code::InvalidArgument | Code::OutOfRange => StoreError::InvalidArgument(message),
        Code::NotFound => StoreError::NotFound,
        Code::AlreadyExists => StoreError::AlreadyExists(message),
        Code::FailedPrecondition => StoreError::FailedPrecondition(refusal_from(&status)),
        Code::ResourceExhausted => StoreError::ResourceExhausted(message),
        // Cancelled: the connection went away under the call (a server
        // stopping), which a retry can get past, as an outage.
        Code::Unavailable | Code::DeadlineExceeded | Code::Aborted | Code::Cancelled => {
            StoreError::Unavailable(message)
        }
        Code::Unauthenticated => StoreError::Unauthenticated(message),
        Code::PermissionDenied => StoreError::PermissionDenied(message),
        Code::Ok | Code::Unknown | Code::Unimplemented | Code::Internal | Code::DataLoss => {
            StoreError::Internal(format!("{:?}: {message}", status.code()))
        }
    }
}

/// A refusal's kind on the wire: the ErrorInfo `reason` and its metadata.
/// Exhaustive, so that a new refusal must choose its name.
fn refusal_reason(refusal: &Refusal) -> (&'static str, HashMap<String, String>) {
    let status =
        |status: &TaskStatus| HashMap::from([(REFUSAL_STATUS_KEY.to_owned(), status.to_string())]);
    match refusal {
        Refusal::Claim(ClaimRefusal::Terminal(s)) => ("CLAIM_TERMINAL", status(s)),
        Refusal::Claim(ClaimRefusal::NotDispatched) => ("CLAIM_NOT_DISPATCHED", HashMap::new()),
        Refusal::Claim(ClaimRefusal::StaleJob) => ("CLAIM_STALE_JOB", HashMap::new()),
        Refusal::Claim(ClaimRefusal::AlreadyClaimed) => ("CLAIM_ALREADY_CLAIMED", HashMap::new()),
        Refusal::Claim(ClaimRefusal::NotNow) => ("CLAIM_NOT_NOW", HashMap::new()),
        Refusal::Fence(FenceRefusal::Terminal(s)) => (REFUSED_TERMINAL, status(s)),
        Refusal::Fence(FenceRefusal::LeaseLost) => (REFUSED_LEASE_LOST, HashMap::new()),
        Refusal::Fence(FenceRefusal::LeaseRequired) => ("FENCE_LEASE_REQUIRED", HashMap::new()),
        Refusal::NoResult(s) => ("NO_RESULT", status(s)),
        Refusal::Question(QuestionRefusal::KeyReused(key)) => (
            "QUESTION_KEY_REUSED",
            HashMap::from([("key".to_owned(), key.clone())]),
        ),
        Refusal::Question(QuestionRefusal::TooMany(count)) => (
            "QUESTION_TOO_MANY",
            HashMap::from([("count".to_owned(), count.to_string())]),
        ),
        Refusal::Hold(HoldRefusal::Dispatched) => ("HOLD_DISPATCHED", HashMap::new()),
        Refusal::Hold(HoldRefusal::HeldByAnother) => ("HOLD_HELD_BY_ANOTHER", HashMap::new()),
        Refusal::Hold(HoldRefusal::Ended(s)) => ("HOLD_ENDED", status(s)),
        Refusal::Hold(HoldRefusal::NotAToolCall) => ("HOLD_NOT_A_TOOL_CALL", HashMap::new()),
        Refusal::IdempotencyKeyInUse => ("IDEMPOTENCY_KEY_IN_USE", HashMap::new()),
        Refusal::Unexplained(_) => ("UNEXPLAINED", HashMap::new()),
    }
}

/// The refusal a FAILED_PRECONDITION stands for: rebuilt from its
/// ErrorInfo, or only its words when it names no kind this build knows.
fn refusal_from(status: &Status) -> Refusal {
    let unexplained = || Refusal::Unexplained(status.message().to_owned());
    let Some(info) = status
        .get_details_error_info()
        .filter(|info| info.domain == ERROR_DOMAIN)
    else {
        return unexplained();
    };
    let task_status = || {
        info.metadata
            .get(REFUSAL_STATUS_KEY)
            .and_then(|s| s.parse::<TaskStatus>().ok())
    };
    let refusal = match info.reason.as_str() {
        "CLAIM_TERMINAL" => task_status().map(|s| Refusal::Claim(ClaimRefusal::Terminal(s))),
        "CLAIM_NOT_DISPATCHED" => Some(Refusal::Claim(ClaimRefusal::NotDispatched)),
        "CLAIM_STALE_JOB" => Some(Refusal::Claim(ClaimRefusal::StaleJob)),
        "CLAIM_ALREADY_CLAIMED" => Some(Refusal::Claim(ClaimRefusal::AlreadyClaimed)),
        "CLAIM_NOT_NOW" => Some(Refusal::Claim(ClaimRefusal::NotNow)),
        REFUSED_TERMINAL => task_status().map(|s| Refusal::Fence(FenceRefusal::Terminal(s))),
        REFUSED_LEASE_LOST => Some(Refusal::Fence(FenceRefusal::LeaseLost)),
        "FENCE_LEASE_REQUIRED" => Some(Refusal::Fence(FenceRefusal::LeaseRequired)),
        "NO_RESULT" => task_status().map(Refusal::NoResult),
        "QUESTION_KEY_REUSED" => info
            .metadata
            .get("key")
            .map(|key| Refusal::Question(QuestionRefusal::KeyReused(key.clone()))),
        "QUESTION_TOO_MANY" => info
            .metadata
            .get("count")
            .and_then(|count| count.parse().ok())
            .map(|count| Refusal::Question(QuestionRefusal::TooMany(count))),
        "HOLD_DISPATCHED" => Some(Refusal::Hold(HoldRefusal::Dispatched)),
        "HOLD_HELD_BY_ANOTHER" => Some(Refusal::Hold(HoldRefusal::HeldByAnother)),
        "HOLD_ENDED" => task_status().map(|s| Refusal::Hold(HoldRefusal::Ended(s))),
        "HOLD_NOT_A_TOOL_CALL" => Some(Refusal::Hold(HoldRefusal::NotAToolCall)),
        "IDEMPOTENCY_KEY_IN_USE" => Some(Refusal::IdempotencyKeyInUse),
        _ => None,
    };
    refusal.unwrap_or_else(unexplained)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_and_shutdown_refusals_say_when_to_come_back() {
        let rate = Status::from(AdmissionRefused {
            message: "too many creates".into(),
            retry_after: Some(std::time::Duration::from_millis(250)),
        });
        assert_eq!(rate.code(), Code::ResourceExhausted);
        let retry = rate.get_details_retry_info().expect("a retry hint");
        assert_eq!(
            retry.retry_delay,
            Some(std::time::Duration::from_millis(250))
        );
        let waiting = Status::from(AdmissionRefused {
            message: "too many waiting calls".into(),
            retry_after: None,
        });
        assert_eq!(waiting.code(), Code::ResourceExhausted);
        assert!(waiting.get_details_retry_info().is_none());
        let stopping = Status::from(ShuttingDown);
        assert_eq!(stopping.code(), Code::Unavailable);
        assert_eq!(stopping.message(), crate::edge::SHUTTING_DOWN);
    }

    fn all_errors() -> Vec<(StoreError, Code)> {
        vec![
            (
                StoreError::InvalidArgument("x".into()),
                Code::InvalidArgument,
            ),
            (StoreError::NotFound, Code::NotFound),
            (StoreError::AlreadyExists("t".into()), Code::AlreadyExists),
            (
                StoreError::FailedPrecondition(Refusal::Unexplained("x".into())),
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
    fn refusals_keep_their_kind_across_the_wire() {
        let refusals = [
            Refusal::Claim(ClaimRefusal::Terminal(TaskStatus::Cancelled)),
            Refusal::Claim(ClaimRefusal::NotDispatched),
            Refusal::Claim(ClaimRefusal::StaleJob),
            Refusal::Claim(ClaimRefusal::AlreadyClaimed),
            Refusal::Claim(ClaimRefusal::NotNow),
            Refusal::Fence(FenceRefusal::Terminal(TaskStatus::Completed)),
            Refusal::Fence(FenceRefusal::LeaseLost),
            Refusal::Fence(FenceRefusal::LeaseRequired),
            Refusal::NoResult(TaskStatus::InputRequired),
            Refusal::Question(QuestionRefusal::KeyReused("confirm".into())),
            Refusal::Question(QuestionRefusal::TooMany(100)),
            Refusal::Hold(HoldRefusal::Dispatched),
            Refusal::Hold(HoldRefusal::HeldByAnother),
            Refusal::Hold(HoldRefusal::Ended(TaskStatus::Failed)),
            Refusal::Hold(HoldRefusal::NotAToolCall),
            Refusal::IdempotencyKeyInUse,
            Refusal::Unexplained("an old server's words".into()),
        ];
        for refusal in refusals {
            let status = Status::from(StoreError::FailedPrecondition(refusal.clone()));
            assert_eq!(status.message(), refusal.to_string());
            assert_eq!(
                store_error_from_status(status),
                StoreError::FailedPrecondition(refusal)
            );
        }
        let bare = Status::failed_precondition("no details");
        assert_eq!(
            store_error_from_status(bare),
            StoreError::FailedPrecondition(Refusal::Unexplained("no details".into()))
        );
    }

    #[test]
    fn not_found_has_one_message() {
        assert_eq!(
            Status::from(StoreError::NotFound).message(),
            "task not found"
        );
    }
}
