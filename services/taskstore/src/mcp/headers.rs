//! The 2026-07-28 standard headers (SEP-2243): `Mcp-Method` names the
//! body's method and `Mcp-Name` its target (`params.name` of `tools/call`,
//! `params.taskId` of `tasks/get|update|cancel`), so that proxies can route
//! and authorize without reading the body. A header that disagrees with the
//! body is refused (-32020), so that nothing in front of the gateway can be
//! told one thing while the gateway does another. Absent headers are
//! accepted (a plain HTTP client may not send them).

use base64::Engine as _;
use serde_json::{Map, Value};

use super::jsonrpc::{RpcError, code};

const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
/// A header value that is not plain ASCII travels as `=?base64?…?=`.
const BASE64_PREFIX: &str = "=?base64?";
const BASE64_SUFFIX: &str = "?=";

/// The body field `Mcp-Name` stands for, per method.
fn named_field(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" => Some("name"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

/// A header value, decoded from its Base64 form when it has one.
fn decoded(raw: &str) -> Option<String> {
    match raw
        .strip_prefix(BASE64_PREFIX)
        .and_then(|inner| inner.strip_suffix(BASE64_SUFFIX))
    {
        Some(inner) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(inner)
                .ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(raw.to_owned()),
    }
}

/// Checks the headers a 2026-07-28 request carries against its body.
pub(super) fn check(
    headers: &http::HeaderMap,
    method: &str,
    params: &Map<String, Value>,
) -> Result<(), RpcError> {
    let mismatch = |what: &str| {
        RpcError::new(
            code::HEADER_MISMATCH,
            format!("the {what} header does not match the body"),
        )
    };
    let header = |name: &str| headers.get(name).map(|v| v.to_str().ok());
    match header(METHOD_HEADER) {
        None => {}
        Some(Some(named)) if named == method => {}
        Some(_) => return Err(mismatch("Mcp-Method")),
    }
    if let (Some(field), Some(raw)) = (named_field(method), header(NAME_HEADER)) {
        let named = raw.and_then(decoded);
        let body = params.get(field).and_then(Value::as_str);
        if named.is_none() || named.as_deref() != body {
            return Err(mismatch("Mcp-Name"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use serde_json::json;

    /// Headers sent, the body's method and params, whether they agree.
    type Case<'a> = (
        &'a [(&'static str, &'static str)],
        &'a str,
        &'a Map<String, Value>,
        bool,
    );

    fn with(pairs: &[(&'static str, &'static str)]) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn headers_must_agree_with_the_body() {
        let call = json!({"name": "echo"});
        let call = call.as_object().expect("object");
        let task = json!({"taskId": "t1"});
        let task = task.as_object().expect("object");
        let cases: [Case<'_>; 9] = [
            (&[], "tools/call", call, true),
            (
                &[("mcp-method", "tools/call"), ("mcp-name", "echo")],
                "tools/call",
                call,
                true,
            ),
            // "echo" in Base64.
            (
                &[("mcp-name", "=?base64?ZWNobw==?=")],
                "tools/call",
                call,
                true,
            ),
            (
                &[("mcp-name", "=?base64?not base64?=")],
                "tools/call",
                call,
                false,
            ),
            (&[("mcp-method", "tools/list")], "tools/call", call, false),
            (&[("mcp-name", "sleep")], "tools/call", call, false),
            (&[("mcp-name", "t1")], "tasks/cancel", task, true),
            (&[("mcp-name", "t2")], "tasks/get", task, false),
            // Methods without a target ignore Mcp-Name.
            (&[("mcp-name", "anything")], "tools/list", call, true),
        ];
        for (headers, method, params, ok) in cases {
            assert_eq!(
                check(&with(headers), method, params).is_ok(),
                ok,
                "{headers:?} {method}"
            );
        }
    }
}
