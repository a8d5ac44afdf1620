//! Who may reach `/mcp` at all, checked before any method runs, for POSTs
//! and for the session stream alike: a browser's origin (DNS rebinding
//! protection) and the caller's credentials.

use axum::response::Response;
use http::{HeaderMap, HeaderValue, StatusCode, header};

use super::gateway::Gateway;
use super::jsonrpc::{RpcError, code};
use super::request::refuse;
use crate::auth::{AuthFailure, bearer_token};
use crate::domain::Caller;

/// DNS rebinding protection: a browser's request from a foreign origin is
/// refused before anything else (the refusal, if it is).
pub(super) fn foreign_origin(gateway: &Gateway, headers: &HeaderMap) -> Option<Response> {
    let origin = headers.get(header::ORIGIN)?;
    if origin_allowed(origin, &gateway.settings.allowed_origins) {
        return None;
    }
    tracing::warn!(origin = ?origin, "mcp request from a foreign origin refused");
    Some(refuse(
        StatusCode::FORBIDDEN,
        None,
        RpcError::new(code::INVALID_REQUEST, "origin not allowed"),
    ))
}

/// Loopback origins always; others only when configured, exactly.
fn origin_allowed(origin: &HeaderValue, allowed: &[String]) -> bool {
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    if allowed.iter().any(|a| a == origin) {
        return true;
    }
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = match rest.strip_prefix('[') {
        Some(v6) => v6.split(']').next().map(|h| format!("[{h}]")),
        None => rest.split(':').next().map(str::to_owned),
    };
    let port_ok = |after: &str| match after.strip_prefix(':') {
        Some(port) => port.chars().all(|c| c.is_ascii_digit()),
        None => after.is_empty(),
    };
    match host.as_deref() {
        Some(h @ ("localhost" | "127.0.0.1" | "[::1]")) => match rest.strip_prefix(h) {
            Some(after) => port_ok(after),
            // An opening bracket without its closing one.
            None => false,
        },
        _ => false,
    }
}

/// Who is calling, or the refusal to send back.
pub(super) async fn authenticate(
    gateway: &Gateway,
    headers: &HeaderMap,
) -> Result<Caller, Response> {
    match gateway
        .authenticator
        .authenticate(bearer_token(headers), None)
        .await
    {
        Ok(caller) => Ok(caller),
        Err(AuthFailure::Unavailable(reason)) => {
            tracing::warn!(reason = %reason, "mcp credentials could not be checked");
            Err(refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                RpcError::new(
                    code::UNAVAILABLE,
                    "credentials cannot be checked now; retry",
                ),
            ))
        }
        Err(failure @ (AuthFailure::Missing | AuthFailure::Invalid(_))) => {
            tracing::info!(
                target: "taskstore::access",
                caller = failure.credential().unwrap_or("unknown"),
                reason = failure.reason(),
                "mcp request refused: not authenticated"
            );
            let mut response = refuse(
                StatusCode::UNAUTHORIZED,
                None,
                RpcError::new(code::INVALID_REQUEST, "missing or invalid credentials"),
            );
            // The metadata's URL is only known when configured (behind an
            // ingress, the Host header may not be the public one).
            let challenge = match (&gateway.authorization_server, metadata_url(gateway)) {
                (Some(_), Some(url)) => format!("Bearer resource_metadata=\"{url}\""),
                _ => "Bearer".to_owned(),
            };
            if let Ok(value) = HeaderValue::from_str(&challenge) {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, value);
            }
            Err(response)
        }
    }
}

/// Where the protected-resource metadata is, from the configured resource
/// URL (`https://host/mcp` → `https://host/.well-known/oauth-protected-resource/mcp`).
fn metadata_url(gateway: &Gateway) -> Option<String> {
    let resource = gateway.settings.resource_url.as_deref()?;
    let (scheme, rest) = resource.split_once("://")?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let suffix = if path.is_empty() {
        String::new()
    } else {
        format!("/{path}")
    };
    Some(format!(
        "{scheme}://{authority}/.well-known/oauth-protected-resource{suffix}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_configured_origins_only() {
        let allowed = vec!["https://app.example.com".to_owned()];
        for (origin, ok) in [
            ("http://localhost", true),
            ("http://localhost:6274", true),
            ("http://127.0.0.1:3000", true),
            ("http://[::1]:8080", true),
            ("https://app.example.com", true),
            ("https://app.example.com.evil.net", false),
            ("http://localhost.evil.net", false),
            ("http://localhost:80x", false),
            ("http://[::1", false),
            ("http://[", false),
            ("http://", false),
            ("http://localhost:", true),
            ("http://evil.net", false),
            ("null", false),
            ("file://localhost", false),
        ] {
            let value = HeaderValue::from_static(origin);
            assert_eq!(origin_allowed(&value, &allowed), ok, "{origin}");
        }
    }

    proptest::proptest! {
        /// Any header value: an answer, never a panic.
        #[test]
        fn any_origin_is_judged(origin in "\\PC{0,40}", prefix in "(http://|https://|)(\\[|localhost|127\\.0\\.0\\.1|\\[::1\\]|)") {
            if let Ok(value) = HeaderValue::from_str(&format!("{prefix}{origin}")) {
                let _ = origin_allowed(&value, &[]);
            }
        }
    }
}
