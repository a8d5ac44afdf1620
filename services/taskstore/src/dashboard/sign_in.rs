//! Single sign-on, the browser's side (the issuer's side is `oidc`):
//!
//! 1. `GET /login/oidc[?tenant=…]` makes a state and a PKCE verifier, keeps
//!    them in a short-lived sealed cookie (SameSite=Lax: it must come back
//!    with the issuer's redirect, a cross-site navigation), and sends the
//!    browser on to the issuer.
//! 2. `GET /login/oidc/callback?code=…&state=…` checks the state against
//!    the cookie, exchanges the code with the verifier, verifies the access
//!    token as every edge does, and starts a session that ends when the
//!    token would have.
//!
//! Both answer with a page that moves on by itself (`Refresh`) instead of
//! a redirect: the first because the CSP's `form-action 'self'` would stop
//! a form's redirect to the issuer, the second because a redirect would
//! still count as the issuer's cross-site navigation, and the session
//! cookie (SameSite=Strict) would not be sent with it.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use chrono::Utc;
use maud::html;
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use super::Board;
use super::account::{home, login_page, session_cookie, session_end};
use super::params::{pairs, value};
use super::render::{Frame, Nav, html_response, page};
use super::session::{Session, SignedIn, cookie_header, cookie_value};
use crate::auth::AuthFailure;
use crate::auth::oidc::{OidcFailure, printable, random_token};
use crate::domain::{Reach, TenantId, may_log_in};

/// The cookie of a sign-on in progress.
const FLOW_COOKIE: &str = "taskstore_dashboard_sign_in";
/// How long a browser has to come back from the issuer.
const FLOW_SECONDS: i64 = 600;
/// A code longer than this is not an issuer's.
const MAX_CODE_CHARS: usize = 2048;

/// What the flow cookie keeps between the two steps.
#[derive(Debug, Serialize, Deserialize)]
struct Flow {
    #[serde(rename = "s")]
    state: String,
    #[serde(rename = "v")]
    verifier: String,
    /// The tenant asked for, for identities that reach every tenant.
    #[serde(rename = "t", skip_serializing_if = "Option::is_none", default)]
    tenant: Option<String>,
    #[serde(rename = "e")]
    expires_at: i64,
}

pub async fn start(State(board): State<Arc<Board>>, RawQuery(raw): RawQuery) -> Response {
    let Some(oidc) = &board.oidc else {
        return login_page(
            &board,
            StatusCode::NOT_FOUND,
            Some("single sign-on is not configured here"),
        );
    };
    let form = match pairs(raw.as_deref().unwrap_or_default()) {
        Ok(form) => form,
        Err(why) => return login_page(&board, StatusCode::BAD_REQUEST, Some(&why)),
    };
    let tenant = match value(&form, "tenant").filter(|named| !named.is_empty()) {
        None => None,
        Some(named) => match TenantId::parse(named) {
            Ok(tenant) => Some(tenant.as_str().to_owned()),
            Err(err) => {
                let why = format!("tenant {err}");
                return login_page(&board, StatusCode::BAD_REQUEST, Some(&why));
            }
        },
    };
    let (Ok(state), Ok(verifier)) = (random_token(), random_token()) else {
        return login_page(
            &board,
            StatusCode::INTERNAL_SERVER_ERROR,
            Some("no randomness for the login"),
        );
    };
    let target = match oidc.authorization_url(&state, &verifier).await {
        Ok(target) => target,
        Err(failure) => return refused_by_issuer(&board, &failure),
    };
    let flow = Flow {
        state,
        verifier,
        tenant,
        expires_at: Utc::now().timestamp() + FLOW_SECONDS,
    };
    let Some(sealed) = board.sign_ins.seal(&flow) else {
        return login_page(
            &board,
            StatusCode::INTERNAL_SERVER_ERROR,
            Some("the login could not be sealed"),
        );
    };
    let cookie = flow_cookie(&board, Some(&sealed));
    moving_on(
        &board,
        "Continuing to your identity provider",
        &target,
        &[cookie],
    )
}

pub async fn callback(
    State(board): State<Arc<Board>>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let Some(oidc) = &board.oidc else {
        return login_page(
            &board,
            StatusCode::NOT_FOUND,
            Some("single sign-on is not configured here"),
        );
    };
    let mut response = match signed_in(&board, oidc, &headers, raw.as_deref()).await {
        Ok(session) => match session_cookie(&board, &session) {
            Some(cookie) => {
                let home = home(board.base());
                moving_on(&board, "Logged in", &home, &[cookie])
            }
            None => login_page(
                &board,
                StatusCode::INTERNAL_SERVER_ERROR,
                Some("the session could not be sealed"),
            ),
        },
        Err(refused) => refused,
    };
    // One flow, one try: its cookie goes whatever happened.
    response
        .headers_mut()
        .append(header::SET_COOKIE, flow_cookie(&board, None));
    response
}

/// The session the callback's request earns, or the page saying why not.
async fn signed_in(
    board: &Board,
    oidc: &crate::auth::oidc::OidcClient,
    headers: &HeaderMap,
    raw: Option<&str>,
) -> Result<Session, Response> {
    let refuse = |status, why: &str| login_page(board, status, Some(why));
    let query =
        pairs(raw.unwrap_or_default()).map_err(|why| refuse(StatusCode::BAD_REQUEST, &why))?;
    let flow = flow_of(board, headers).ok_or_else(|| {
        refuse(
            StatusCode::BAD_REQUEST,
            "this login was started too long ago or in another browser: log in again",
        )
    })?;
    if let Some(error) = value(&query, "error") {
        let error = printable(error);
        tracing::info!(error = %error, "dashboard sign-on refused by the identity provider");
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            &format!("the identity provider did not log you in ({error})"),
        ));
    }
    let state = value(&query, "state").unwrap_or_default();
    let same_state: bool = state.as_bytes().ct_eq(flow.state.as_bytes()).into();
    if !same_state {
        tracing::warn!("dashboard sign-on refused: the state is not this browser's");
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "this login was not started by this browser: log in again",
        ));
    }
    let code = value(&query, "code")
        .filter(|code| !code.is_empty() && code.len() <= MAX_CODE_CHARS)
        .ok_or_else(|| {
            refuse(
                StatusCode::BAD_REQUEST,
                "the identity provider sent no code",
            )
        })?;
    let token = oidc
        .exchange(code, &flow.verifier)
        .await
        .map_err(|failure| refused_by_issuer(board, &failure))?;
    let Some(jwt) = board.authenticator.jwt() else {
        return Err(refuse(
            StatusCode::NOT_FOUND,
            "single sign-on is not configured here",
        ));
    };
    let verified = match jwt.verify(&token).await {
        Ok(verified) => verified,
        Err(AuthFailure::Unavailable(why)) => {
            tracing::warn!(error = %why, "dashboard sign-on: the issuer's keys cannot be fetched");
            return Err(refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "the identity provider's keys cannot be fetched now; try again in a moment",
            ));
        }
        Err(failure) => {
            tracing::info!(reason = ?failure, "dashboard sign-on refused: the token was not accepted");
            return Err(refuse(
                StatusCode::UNAUTHORIZED,
                "the identity provider's token was not accepted here (its audience, role or tenant)",
            ));
        }
    };
    let caller = verified.caller;
    if !may_log_in(caller.role) {
        tracing::info!(subject = %caller.subject, "dashboard sign-on refused: a worker identity");
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "worker identities cannot log in to the dashboard",
        ));
    }
    let tenant = match (&caller.reach, flow.tenant) {
        (Reach::Tenant(_), _) => None,
        (Reach::AllTenants, Some(tenant)) => Some(tenant),
        (Reach::AllTenants, None) => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "this identity reaches every tenant: name the tenant to look at, then log in again",
            ));
        }
    };
    tracing::info!(subject = %caller.subject, role = %caller.role, method = "oidc", "dashboard login");
    crate::metrics::dashboard_action("login");
    Ok(Session {
        session_id: Session::new_id(),
        key_id: None,
        signed_in: Some(SignedIn::of(&caller)),
        tenant,
        expires_at: session_end(board, Some(verified.expires_at)),
    })
}

/// The unexpired flow in the request's cookie, if any.
fn flow_of(board: &Board, headers: &HeaderMap) -> Option<Flow> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(|value| cookie_value(value, FLOW_COOKIE))
        .and_then(|value| board.sign_ins.open::<Flow>(value))
        .filter(|flow| Utc::now().timestamp() < flow.expires_at)
}

/// The flow cookie's `Set-Cookie` (a removal when `None`): only sent to the
/// sign-on routes, and with the issuer's redirect back (Lax).
fn flow_cookie(board: &Board, sealed: Option<&str>) -> HeaderValue {
    let path = format!("{}/login/oidc", board.base());
    let cookie = cookie_header(
        FLOW_COOKIE,
        sealed,
        &path,
        "Lax",
        board.settings.secure_cookie,
        u64::try_from(FLOW_SECONDS).unwrap_or(600),
    );
    HeaderValue::from_str(&cookie).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn refused_by_issuer(board: &Board, failure: &OidcFailure) -> Response {
    match failure {
        OidcFailure::Unavailable(why) => {
            tracing::warn!(error = %why, "dashboard sign-on: the identity provider cannot be reached");
            login_page(
                board,
                StatusCode::SERVICE_UNAVAILABLE,
                Some("the identity provider cannot be reached now; try again in a moment"),
            )
        }
        OidcFailure::Refused(why) => {
            tracing::info!(error = %why, "dashboard sign-on: the identity provider refused the code");
            login_page(
                board,
                StatusCode::UNAUTHORIZED,
                Some(&format!(
                    "the identity provider refused the login ({why}): log in again"
                )),
            )
        }
    }
}

/// A page that moves on to `target` by itself (and links to it, for a
/// browser that does not), setting `cookies`.
fn moving_on(board: &Board, title: &str, target: &str, cookies: &[HeaderValue]) -> Response {
    let frame = Frame {
        base: board.base(),
        viewer: None,
        title,
        current: Nav::None,
    };
    let body = html! {
        h1 { (title) }
        p { a #continue href=(target) { "Continue" } }
    };
    let mut response = html_response(StatusCode::OK, page(&frame, body));
    let headers = response.headers_mut();
    if let Ok(refresh) = HeaderValue::from_str(&format!("0; url={target}")) {
        headers.insert("refresh", refresh);
    }
    for cookie in cookies {
        headers.append(header::SET_COOKIE, cookie.clone());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flow_cookie_is_lax_and_kept_to_the_sign_on_routes() {
        let cookie = cookie_header(FLOW_COOKIE, Some("v"), "/ops/login/oidc", "Lax", true, 600);
        assert!(cookie.contains("SameSite=Lax") && cookie.contains("Path=/ops/login/oidc"));
        assert!(cookie.contains("HttpOnly") && cookie.contains("Secure"));
    }
}
