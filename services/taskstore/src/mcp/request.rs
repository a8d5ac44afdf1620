//! One posted JSON-RPC message past the HTTP edge: its context (revision,
//! tenant, session, declared extension) and its answer, JSON or (a wait
//! that asks questions first) an event stream; each request measured and
//! logged once.

use std::sync::Arc;

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Map, Value};

use super::call::Call;
use super::errors::revision_refused;
use super::gateway::{Gateway, TASKS_EXTENSION};
use super::headers;
use super::jsonrpc::{self, Id, RpcError, code};
use super::methods;
use super::reply::{Body, Reply};
use super::streams;
use crate::domain::{
    Caller, Revision, Role, Scope, SessionId, TENANT_METADATA, TenantId, TenantRefused, revision_of,
};

pub(super) const SESSION_HEADER: &str = "mcp-session-id";
pub(super) const VERSION_HEADER: &str = "mcp-protocol-version";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

pub(super) async fn request(
    gateway: Arc<Gateway>,
    headers: &HeaderMap,
    caller: Caller,
    id: Id,
    method: String,
    params: Map<String, Value>,
    body: Bytes,
) -> Response {
    let call = match call_of(
        &gateway,
        headers,
        caller,
        &method,
        &params,
        Some(id.clone()),
    ) {
        Ok(call) => call,
        Err((status, error)) => return refuse(status, Some(&id), error),
    };
    let started = std::time::Instant::now();
    let outcome = methods::handle(&gateway, &call, &method, params, &body).await;
    let label = methods::metric_label(&method);
    let measured = Measured {
        label,
        revision: call.revision.as_str(),
        subject: call.caller.subject.clone(),
        started,
    };
    let Reply { body, session } = match outcome {
        Ok(reply) => reply,
        Err(error) => {
            let outcome = Err(error);
            measured.done(&outcome);
            return json_response(StatusCode::OK, &jsonrpc::response(Some(&id), outcome));
        }
    };
    let mut response = match body {
        Body::Json(result) => {
            let outcome = Ok(result);
            measured.done(&outcome);
            json_response(StatusCode::OK, &jsonrpc::response(Some(&id), outcome))
        }
        Body::Stream(response) => {
            measured.done(&Ok(Value::Null));
            response
        }
        Body::Waiting(waiting) => {
            let scope = call.scope.clone();
            streams::respond(gateway, scope, waiting, move |outcome| {
                measured.done(outcome)
            })
            .await
        }
    };
    if let Some(session) = session
        && let Ok(value) = HeaderValue::from_str(session.as_str())
    {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

/// What a request is measured and logged as, once its outcome is known.
struct Measured {
    label: &'static str,
    revision: &'static str,
    subject: String,
    started: std::time::Instant,
}

impl Measured {
    fn done(&self, outcome: &Result<Value, RpcError>) {
        let code = match outcome {
            Ok(_) => "ok".to_owned(),
            Err(error) => error.code.to_string(),
        };
        crate::metrics::mcp_request_ended(self.label, self.revision, &code, self.started);
        tracing::info!(
            target: "taskstore::access",
            caller = %self.subject,
            mcp.method = self.label,
            mcp.revision = self.revision,
            outcome = %code,
            duration_ms = self.started.elapsed().as_secs_f64() * 1000.0,
            "mcp request"
        );
    }
}

/// The request's context, or why it cannot have one (with the HTTP status
/// the transport prescribes).
pub(super) fn call_of(
    gateway: &Gateway,
    headers: &HeaderMap,
    caller: Caller,
    method: &str,
    params: &Map<String, Value>,
    id: Option<Id>,
) -> Result<Call, (StatusCode, RpcError)> {
    let meta = params.get("_meta").and_then(Value::as_object);
    let meta_version = meta
        .and_then(|m| m.get(META_VERSION))
        .and_then(Value::as_str);
    let revision =
        revision_of(meta_version, header_str(headers, VERSION_HEADER)).map_err(revision_refused)?;
    if revision == Revision::V2026_07_28 {
        headers::check(headers, method, params).map_err(|err| (StatusCode::BAD_REQUEST, err))?;
    }
    // Workers never speak MCP: refused as the method table refuses them,
    // before they are asked which tenant they act in.
    if caller.role == Role::Worker {
        return Err((StatusCode::OK, methods::not_allowed(&caller, method)));
    }
    let tenant = tenant_of(headers, &caller)?;
    let session = match revision {
        Revision::V2026_07_28 => None,
        Revision::V2025_11_25 => match header_str(headers, SESSION_HEADER) {
            None => None,
            Some(raw) => Some(
                SessionId::parse(raw, gateway.limits.max_session_id_bytes).map_err(|err| {
                    (
                        StatusCode::BAD_REQUEST,
                        RpcError::new(code::INVALID_REQUEST, format!("Mcp-Session-Id {err}")),
                    )
                })?,
            ),
        },
    };
    if revision == Revision::V2025_11_25 && session.is_none() && methods::needs_session(method) {
        return Err((
            StatusCode::BAD_REQUEST,
            RpcError::new(
                code::INVALID_REQUEST,
                "no Mcp-Session-Id: send initialize first, then the session id it returns with every request",
            ),
        ));
    }
    let extension = meta
        .and_then(|m| m.get(META_CAPABILITIES))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(TASKS_EXTENSION))
        .is_some_and(|tasks| !tasks.is_null());
    Ok(Call {
        caller,
        scope: Scope { tenant, session },
        revision,
        id,
        tasks_extension: extension,
    })
}

/// The tenant the request acts in: the caller's own, or, for credentials
/// of every tenant, the one its `X-Taskstore-Tenant` header names.
fn tenant_of(headers: &HeaderMap, caller: &Caller) -> Result<TenantId, (StatusCode, RpcError)> {
    let named = match headers.get(TENANT_METADATA) {
        None => None,
        Some(value) => {
            let raw = value.to_str().unwrap_or("\u{fffd}");
            let tenant = TenantId::parse(raw).map_err(|err| {
                (
                    StatusCode::BAD_REQUEST,
                    RpcError::new(code::INVALID_REQUEST, format!("{TENANT_METADATA} {err}")),
                )
            })?;
            Some(tenant)
        }
    };
    caller
        .tenant_for(named.as_ref())
        .map_err(|refused| match refused {
            TenantRefused::Foreign => (StatusCode::FORBIDDEN, forbidden()),
            TenantRefused::NotNamed => (
                StatusCode::BAD_REQUEST,
                RpcError::new(code::INVALID_REQUEST, refused.to_string()),
            ),
        })
}

/// A JSON body with `status`.
pub(super) fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// An answer that is not a JSON-RPC response to a readable request.
pub(super) fn refuse(status: StatusCode, id: Option<&Id>, error: RpcError) -> Response {
    json_response(status, &jsonrpc::response(id, Err(error)))
}

pub(super) fn forbidden() -> RpcError {
    RpcError::new(code::FORBIDDEN, "the credentials do not allow this")
}

pub(super) fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
