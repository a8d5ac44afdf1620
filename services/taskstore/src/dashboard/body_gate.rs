//! A changing request's body is read only once its sender is known, and
//! within a deadline: a form of a request without a valid session is never
//! read (the request is answered from its headers), and a body that
//! trickles in is cut off, so that slow senders cannot hold the port's
//! connections without logging in. Only the login form is read without a
//! session, and it is small.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{Method, Request, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Board;
use super::params::MAX_FORM_BYTES;

/// The largest login form: a key and a tenant.
const MAX_LOGIN_FORM_BYTES: usize = 4 * 1024;

pub async fn read_after_identifying(
    State(board): State<Arc<Board>>,
    request: Request<Body>,
    next: Next,
) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD) {
        return next.run(request).await;
    }
    let logging_in = request.uri().path().ends_with("/login");
    let viewer = if logging_in {
        None
    } else {
        match board.viewer(request.headers()).await {
            Ok(viewer) => Some(viewer),
            Err(refused) => return refused.respond(board.base(), None),
        }
    };
    let limit = if logging_in {
        MAX_LOGIN_FORM_BYTES
    } else {
        MAX_FORM_BYTES
    };
    let (parts, body) = request.into_parts();
    let deadline = board.settings.header_read_timeout;
    match tokio::time::timeout(deadline, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(form)) => {
            let mut request = Request::from_parts(parts, Body::from(form));
            // The handler's `Viewer` extractor takes it from here.
            if let Some(viewer) = viewer {
                request.extensions_mut().insert(viewer);
            }
            next.run(request).await
        }
        Ok(Err(_)) => (StatusCode::PAYLOAD_TOO_LARGE, "the form is too large").into_response(),
        Err(_) => (
            StatusCode::REQUEST_TIMEOUT,
            "the form did not arrive in time",
        )
            .into_response(),
    }
}
