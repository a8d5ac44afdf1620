//! Logging in with an API key, and out. A login proves an API key's secret
//! once, through the same authenticator as every edge; the session cookie
//! then holds the key's id only (see `session`). Worker keys, and keys that
//! reach every tenant without naming one, are refused with a reason.
//! Single sign-on is `sign_in`; both end in [`session_cookie`].

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use chrono::Utc;

use super::Board;
use super::pages;
use super::params::{pairs, value};
use super::render::{Frame, Nav, html_response, page, see_other};
use super::session::{Session, set_cookie};
use super::viewer::Viewer;
use crate::auth::{AuthFailure, Authenticator};
use crate::domain::{Reach, TenantId, may_log_in};

pub async fn login_form(State(board): State<Arc<Board>>) -> Response {
    if matches!(board.authenticator, Authenticator::Off) {
        return see_other(&home(board.base()));
    }
    login_page(&board, StatusCode::OK, None)
}

pub async fn log_in(State(board): State<Arc<Board>>, body: Bytes) -> Response {
    if matches!(board.authenticator, Authenticator::Off) {
        return see_other(&home(board.base()));
    }
    let form = std::str::from_utf8(&body)
        .map_err(|_| "the form is not UTF-8".to_owned())
        .and_then(pairs);
    let form = match form {
        Ok(form) => form,
        Err(why) => return login_page(&board, StatusCode::BAD_REQUEST, Some(&why)),
    };
    let key = value(&form, "api_key").unwrap_or("");
    let Some(keys) = board.authenticator.api_keys() else {
        return login_page(
            &board,
            StatusCode::UNAUTHORIZED,
            Some("this service does not accept API keys (--auth api-keys)"),
        );
    };
    let caller = match keys.authenticate(key).await {
        Ok(caller) => caller,
        Err(AuthFailure::Unavailable(_)) => {
            return login_page(
                &board,
                StatusCode::SERVICE_UNAVAILABLE,
                Some("the key store cannot be reached now; try again in a moment"),
            );
        }
        Err(failure) => {
            tracing::info!(reason = ?failure, "dashboard login refused");
            return login_page(
                &board,
                StatusCode::UNAUTHORIZED,
                Some("that key was not accepted"),
            );
        }
    };
    if !may_log_in(caller.role) {
        tracing::info!(subject = %caller.subject, "dashboard login refused: a worker key");
        return login_page(
            &board,
            StatusCode::FORBIDDEN,
            Some("worker keys cannot log in to the dashboard"),
        );
    }
    let tenant = match (&caller.reach, value(&form, "tenant")) {
        (Reach::Tenant(_), _) => None,
        (Reach::AllTenants, Some(named)) => match TenantId::parse(named) {
            Ok(tenant) => Some(tenant.as_str().to_owned()),
            Err(err) => {
                return login_page(
                    &board,
                    StatusCode::BAD_REQUEST,
                    Some(&format!("tenant {err}")),
                );
            }
        },
        (Reach::AllTenants, None) => {
            return login_page(
                &board,
                StatusCode::BAD_REQUEST,
                Some("this key reaches every tenant: name the tenant to look at"),
            );
        }
    };
    let session = Session {
        session_id: Session::new_id(),
        key_id: caller.subject.strip_prefix("key:").map(str::to_owned),
        signed_in: None,
        tenant,
        expires_at: session_end(&board, None),
    };
    let Some(cookie) = session_cookie(&board, &session) else {
        return login_page(
            &board,
            StatusCode::INTERNAL_SERVER_ERROR,
            Some("the session could not be sealed"),
        );
    };
    tracing::info!(subject = %caller.subject, role = %caller.role, method = "api-key", "dashboard login");
    crate::metrics::dashboard_action("login");
    let mut response = see_other(&home(board.base()));
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    response
}

/// When a session starting now ends: after the session lifetime, or when
/// the credential it was made from expires (`credential_expires_at`, Unix
/// seconds), whichever comes first.
pub(super) fn session_end(board: &Board, credential_expires_at: Option<i64>) -> i64 {
    let lifetime = i64::try_from(board.settings.session_lifetime.as_secs()).unwrap_or(i64::MAX / 2);
    let end = Utc::now().timestamp().saturating_add(lifetime);
    credential_expires_at.map_or(end, |expires| end.min(expires))
}

/// The `Set-Cookie` header of `session`; `None` if it could not be sealed.
pub(super) fn session_cookie(board: &Board, session: &Session) -> Option<HeaderValue> {
    // A session without an id could not be ended by a logout.
    session.session_id.as_ref()?;
    let sealed = board.sessions.seal(session)?;
    let max_age = u64::try_from(session.expires_at - Utc::now().timestamp()).unwrap_or(0);
    let cookie = set_cookie(
        Some(&sealed),
        board.base(),
        board.settings.secure_cookie,
        max_age,
    );
    HeaderValue::from_str(&cookie).ok()
}

/// Ends the session on every replica (a copy of its cookie is worth
/// nothing after), and clears the cookie.
/// (Its viewer was identified by the body gate, like every action's.)
pub async fn log_out(
    State(board): State<Arc<Board>>,
    viewer: Viewer,
    headers: HeaderMap,
) -> Response {
    tracing::info!(subject = %viewer.caller.subject, "dashboard logout");
    if let Some(session) = board.session_of(&headers)
        && let Some(id) = &session.session_id
    {
        let until = chrono::DateTime::from_timestamp(session.expires_at, 0).unwrap_or_default();
        if let Err(err) = board.keys.end_session(id, until).await {
            tracing::warn!(error = %err, "dashboard logout: the session could not be ended; it lasts until it expires");
            return login_page(
                &board,
                StatusCode::SERVICE_UNAVAILABLE,
                Some("the session could not be ended now; try again in a moment"),
            );
        }
    }
    let mut response = see_other(&format!("{}/login", board.base()));
    let cookie = set_cookie(None, board.base(), board.settings.secure_cookie, 0);
    if let Ok(cookie) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

pub(super) fn login_page(board: &Board, status: StatusCode, refused: Option<&str>) -> Response {
    let frame = Frame {
        base: board.base(),
        viewer: None,
        title: "Log in",
        current: Nav::None,
    };
    let methods = pages::login::Methods {
        api_keys: board.authenticator.api_keys().is_some(),
        single_sign_on: board.oidc.is_some(),
    };
    html_response(
        status,
        page(&frame, pages::login::body(board.base(), methods, refused)),
    )
}

pub(super) fn home(base: &str) -> String {
    if base.is_empty() {
        "/".to_owned()
    } else {
        base.to_owned()
    }
}
