//! Why a page is not shown, and the page that says so.

use axum::http::StatusCode;
use axum::response::Response;

use super::render::{failure_page, see_other};
use super::viewer::Viewer;
use crate::error::StoreError;

/// Why a page is not shown; each becomes a page with its status.
#[derive(Debug)]
pub enum Refused {
    /// No (valid) session: to the login page.
    LogIn,
    /// Missing, expired, another tenant's: one answer for all.
    NotFound,
    Forbidden(&'static str),
    BadRequest(String),
    /// The store or key store cannot answer now; retry.
    Unavailable(String),
    /// A failure of ours; the details are in the log.
    Internal,
}

impl From<StoreError> for Refused {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound => Refused::NotFound,
            StoreError::InvalidArgument(message) => Refused::BadRequest(message),
            StoreError::AlreadyExists(id) => {
                Refused::BadRequest(format!("task {id} already exists"))
            }
            StoreError::FailedPrecondition(refusal) => Refused::BadRequest(refusal.to_string()),
            StoreError::ResourceExhausted(message) | StoreError::Unavailable(message) => {
                Refused::Unavailable(message)
            }
            StoreError::Unauthenticated(_) => Refused::LogIn,
            StoreError::PermissionDenied(_) => {
                Refused::Forbidden("your credentials do not allow this")
            }
            StoreError::Internal(_) => Refused::Internal,
        }
    }
}

impl Refused {
    /// The response for a refusal on a page of a dashboard under `base`.
    pub fn respond(self, base: &str, viewer: Option<&Viewer>) -> Response {
        match self {
            Refused::LogIn => see_other(&format!("{base}/login")),
            Refused::NotFound => failure_page(
                base,
                viewer,
                StatusCode::NOT_FOUND,
                "Not found",
                "There is no such task, or it expired.",
            ),
            Refused::Forbidden(why) => {
                failure_page(base, viewer, StatusCode::FORBIDDEN, "Not allowed", why)
            }
            Refused::BadRequest(why) => failure_page(
                base,
                viewer,
                StatusCode::BAD_REQUEST,
                "Not understood",
                &why,
            ),
            Refused::Unavailable(why) => failure_page(
                base,
                viewer,
                StatusCode::SERVICE_UNAVAILABLE,
                "Unavailable",
                &format!("The store cannot answer now ({why}); try again in a moment."),
            ),
            Refused::Internal => failure_page(
                base,
                viewer,
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something failed",
                "The dashboard failed to show this; the details are in the service's log.",
            ),
        }
    }
}
