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
use http::{HeaderMap, StatusCode, header};
use serde_json::{Map, json};

use super::admit::{authenticate, foreign_origin};
use super::asking;
use super::gateway::Gateway;
use super::jsonrpc::{self, Message, RpcError, code};
use super::listen;
use super::methods;
use super::request::{call_of, header_str, json_response, refuse, request};

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
            if let Ok(call) = call_of(&gateway, &headers, caller, "", &Map::new(), None)
                && let Err(refused) = asking::take_response(&gateway, &call, &id, outcome).await
            {
                return refuse(StatusCode::BAD_REQUEST, Some(&id), refused);
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

fn is_json(headers: &HeaderMap) -> bool {
    header_str(headers, header::CONTENT_TYPE.as_str()).is_some_and(|value| {
        value
            .split(';')
            .next()
            .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
    })
}

/// RFC 9728 metadata: which authorization server issues tokens for `/mcp`.
async fn resource_metadata(State(gateway): State<Arc<Gateway>>) -> Response {
    // Never from the request's Host (configuration requires the URL with
    // JWT); without one, the metadata names no resource.
    json_response(
        StatusCode::OK,
        &json!({
            "resource": gateway.settings.resource_url,
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
    use http::HeaderValue;

    use super::*;

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
