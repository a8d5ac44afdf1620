//! Identifying a request's viewer: the browser's session resolved to a
//! [`Caller`] through the same key store every edge uses (or, after single
//! sign-on, the caller the issuer's token stood for); without
//! authentication, the one caller there is, for loopback names only.
//!
//! [`Caller`]: crate::domain::Caller

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::response::Response;
use chrono::Utc;

use super::Board;
use super::refused::Refused;
use super::session::{Session, cookie_name, cookie_values};
use super::viewer::Viewer;
use crate::auth::{AuthFailure, Authenticator};
use crate::domain::{Caller, TenantId, may_log_in};

/// Whether the request's `Host` names a loopback address (any port); a
/// request without one (not a browser's) passes.
fn addressed_to_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST) else {
        return true;
    };
    let Ok(host) = host.to_str() else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().map(|inner| format!("[{inner}]")),
        None => host.split(':').next().map(str::to_owned),
    };
    name.is_some_and(|name| {
        matches!(
            name.to_ascii_lowercase().as_str(),
            "localhost" | "127.0.0.1" | "[::1]"
        )
    })
}

/// A handler that takes a [`Viewer`] is served to identified viewers only;
/// anyone else gets the refusal's page (the login, or 403). A changing
/// action's viewer was identified before its form was read
/// (`body_gate.rs`), and is handed over rather than identified twice.
impl FromRequestParts<Arc<Board>> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        board: &Arc<Board>,
    ) -> Result<Self, Self::Rejection> {
        if let Some(viewer) = parts.extensions.get::<Viewer>() {
            return Ok(viewer.clone());
        }
        board
            .viewer(&parts.headers)
            .await
            .map_err(|refused| refused.respond(board.base(), None))
    }
}

impl Board {
    /// The viewer of a request: with authentication off, the one caller
    /// there is, in the default tenant; else the session cookie's key, if
    /// it is still valid and may log in.
    pub async fn viewer(&self, headers: &HeaderMap) -> Result<Viewer, Refused> {
        let read_only = self.settings.read_only;
        if matches!(self.authenticator, Authenticator::Off) {
            // Without authentication only loopback is served; a page of
            // another site whose name was made to resolve to 127.0.0.1 (DNS
            // rebinding) would be same-origin to it, so the name the request
            // was sent to must be a loopback one too.
            if !addressed_to_loopback(headers) {
                return Err(Refused::Forbidden(
                    "without authentication the dashboard answers requests to localhost, 127.0.0.1 or [::1] only",
                ));
            }
            return Ok(Viewer {
                caller: Caller::unauthenticated(),
                tenant: TenantId::default_tenant(),
                read_only,
            });
        }
        let session = self.session_of(headers).ok_or(Refused::LogIn)?;
        // Ended by a logout, on any replica.
        let id = session.session_id.as_deref().ok_or(Refused::LogIn)?;
        match self.keys.session_ended(id).await {
            Ok(false) => {}
            Ok(true) => return Err(Refused::LogIn),
            Err(err) => return Err(Refused::Unavailable(err.to_string())),
        }
        let caller = match (&session.key_id, &session.signed_in) {
            (Some(key_id), _) => {
                let keys = self.authenticator.api_keys().ok_or(Refused::LogIn)?;
                match keys.caller_of_key_id(key_id).await {
                    Ok(caller) => caller,
                    Err(AuthFailure::Unavailable(why)) => return Err(Refused::Unavailable(why)),
                    Err(_) => return Err(Refused::LogIn),
                }
            }
            // Vouched for by the identity provider at login; the session
            // ends when its token would have (see `sign_in`).
            (None, Some(signed_in)) if self.oidc.is_some() => {
                signed_in.caller().ok_or(Refused::LogIn)?
            }
            (None, _) => return Err(Refused::LogIn),
        };
        if !may_log_in(caller.role) {
            return Err(Refused::LogIn);
        }
        let named = session
            .tenant
            .as_deref()
            .map(TenantId::parse)
            .transpose()
            .map_err(|_| Refused::LogIn)?;
        let tenant = caller
            .tenant_for(named.as_ref())
            .map_err(|_| Refused::LogIn)?;
        Ok(Viewer {
            caller,
            tenant,
            read_only,
        })
    }

    /// The unexpired session in the request's cookie, if any: the first
    /// of the cookies of our name that opens (one planted beside ours
    /// under another path cannot shadow it).
    pub(super) fn session_of(&self, headers: &HeaderMap) -> Option<Session> {
        let name = cookie_name(self.base(), self.settings.secure_cookie);
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| cookie_values(value, name))
            .filter_map(|value| self.sessions.open::<Session>(value))
            .find(|session| !session.is_expired(Utc::now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn only_loopback_names_pass_without_authentication() {
        let with = |host: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, HeaderValue::from_static(host));
            addressed_to_loopback(&headers)
        };
        for good in [
            "127.0.0.1:50053",
            "localhost",
            "LOCALHOST:8080",
            "[::1]:50053",
            "[::1]",
        ] {
            assert!(with(good), "{good}");
        }
        for bad in [
            "evil.example",
            "evil.example:50053",
            "127.0.0.1.evil.example",
            "[::2]:1",
            "10.0.0.1",
        ] {
            assert!(!with(bad), "{bad}");
        }
        assert!(addressed_to_loopback(&HeaderMap::new()));
    }
}
