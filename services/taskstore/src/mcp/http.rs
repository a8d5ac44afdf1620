//! The HTTP edge of `/mcp`: everything about a POST is checked here before
//! a method runs (origin, content type, size, credentials, revision,
//! session); a GET opens the session's stream (`listen.rs`). Any replica
//! answers any request: nothing is kept per client.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Map, json};

use super::asking;
use super::gateway::Gateway;
use super::jsonrpc::{self, Message, RpcError, code};
use super::listen;
use super::methods;
use super::request::{call_of, header_str, json_response, refuse, request};
use crate::auth::{AuthFailure, bearer_token};
use crate::domain::Caller;

/// How long a request's body may take to arrive (a slow sender holds a
/// connection and a buffer).
const BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The routes: `/mcp`, `/healthz`, and the OAuth protected-resource
/// metadata when bearer tokens of an authorization server are accepted.
pub(super) fn router(gateway: Arc<Gateway>) -> Router {
    let mut router = Router::new()
        .route(
            "/mcp",
            post(post_message).get(listen::open).delete(end_session),
        )
        .route("/healthz", get(|| async { "ok" }));
    if gateway.authorization_server.is_some() {
        router = router
            .route(
                "/.well-known/oauth-protected-resource",
                get(resource_metadata),
            )
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                get(resource_metadata),
            );
    }
    router.with_state(gateway)
}

async fn post_message(
    State(gateway): State<Arc<Gateway>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Some(refusal) = foreign_origin(&gateway, &headers) {
        return refusal;
    }
    if !is_json(&headers) {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            RpcError::new(
                code::INVALID_REQUEST,
                "content-type must be application/json",
            ),
        );
    }
    // Credentials first: an anonymous caller gets nothing read of its body.
    let caller = match authenticate(&gateway, &headers).await {
        Ok(caller) => caller,
        Err(refusal) => return refusal,
    };
    let limit = gateway.settings.max_body_bytes;
    let read = tokio::time::timeout(BODY_READ_TIMEOUT, axum::body::to_bytes(body, limit)).await;
    let Ok(Ok(bytes)) = read else {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            None,
            RpcError::new(
                code::INVALID_REQUEST,
                format!(
                    "the body is larger than {limit} bytes, or did not arrive within {} s",
                    BODY_READ_TIMEOUT.as_secs()
                ),
            ),
        );
    };
    match jsonrpc::parse(&bytes) {
        Err(unparsable) => refuse(
            StatusCode::BAD_REQUEST,
            unparsable.id.as_ref(),
            unparsable.error,
        ),
        Ok(Message::Response { id, outcome }) => {
            // An answer to an input request we sent: acknowledged whatever
            // it names; a good one is stored (`asking.rs`).
            if let Ok(call) = call_of(&gateway, &headers, caller, "", &Map::new(), None) {
                asking::take_response(&gateway, &call, &id, outcome).await;
            }
            StatusCode::ACCEPTED.into_response()
        }
        Ok(Message::Notification { method, params }) => {
            if let Ok(call) = call_of(&gateway, &headers, caller, &method, &params, None) {
                methods::notify(&gateway, &call, &method, &params);
            }
            StatusCode::ACCEPTED.into_response()
        }
        Ok(Message::Request { id, method, params }) => {
            request(gateway, &headers, caller, id, method, params, bytes).await
        }
    }
}

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

fn is_json(headers: &HeaderMap) -> bool {
    header_str(headers, header::CONTENT_TYPE.as_str()).is_some_and(|value| {
        value
            .split(';')
            .next()
            .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
    })
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

/// RFC 9728 metadata: which authorization server issues tokens for `/mcp`.
async fn resource_metadata(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    let resource = gateway.settings.resource_url.clone().unwrap_or_else(|| {
        let host = header_str(&headers, header::HOST.as_str()).unwrap_or("localhost");
        format!("http://{host}/mcp")
    });
    json_response(
        StatusCode::OK,
        &json!({
            "resource": resource,
            "authorization_servers": gateway.authorization_server.iter().collect::<Vec<_>>(),
            "bearer_methods_supported": ["header"],
        }),
    )
}

/// Ending a session frees nothing (no session state is kept); its tasks
/// live out their ttl.
async fn end_session() -> Response {
    StatusCode::NO_CONTENT.into_response()
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

    #[test]
    fn only_json_bodies() {
        let mut headers = HeaderMap::new();
        assert!(!is_json(&headers));
        for (value, ok) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            ("text/plain", false),
            ("application/jsonx", false),
        ] {
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            assert_eq!(is_json(&headers), ok, "{value}");
        }
    }
}
