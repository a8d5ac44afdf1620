//! JSON-RPC 2.0 as MCP uses it over Streamable HTTP: one message per POST
//! (batches were removed from MCP in 2025-06-18), requests answered with one
//! response, notifications and client responses acknowledged with 202.

use serde_json::{Map, Value, json};

/// Error codes: JSON-RPC's, and the ones MCP added.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// 2026-07-28: the `Mcp-*` headers and the body disagree.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// 2026-07-28: the request needs a client capability it did not declare.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// 2026-07-28: the request names a protocol revision not served.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    /// Implementation-defined server errors (-32000 to -32099): ours.
    /// The caller's rights do not allow the method.
    pub const FORBIDDEN: i64 = -32003;
    /// A quota or rate limit refused the request; `data.retryAfterMs` may
    /// say when to come back.
    pub const RESOURCE_EXHAUSTED: i64 = -32004;
    /// A dependency is down or the server is stopping; retry.
    pub const UNAVAILABLE: i64 = -32005;
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn to_json(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let (Some(data), Some(object)) = (&self.data, error.as_object_mut()) {
            object.insert("data".to_owned(), data.clone());
        }
        error
    }
}

/// A request id: a string or an integer (JSON-RPC also allows null, which
/// MCP forbids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Id(Value);

impl Id {
    fn parse(value: &Value) -> Option<Self> {
        match value {
            Value::String(_) => Some(Self(value.clone())),
            Value::Number(n) if n.is_i64() || n.is_u64() => Some(Self(value.clone())),
            _ => None,
        }
    }

    /// An id as JSON (a string or an integer), if it is one.
    pub fn from_value(value: &Value) -> Option<Self> {
        Self::parse(value)
    }

    pub fn as_json(&self) -> &Value {
        &self.0
    }
}

/// One message a client posted.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request {
        id: Id,
        method: String,
        params: Map<String, Value>,
    },
    Notification {
        method: String,
        params: Map<String, Value>,
    },
    /// A client's answer to a request the server sent it (an input request
    /// of a task): its id, and its result or error.
    Response {
        id: Id,
        outcome: Result<Map<String, Value>, Value>,
    },
}

/// Why a posted body is not a message. `id` is the request's when it could
/// be read, so the error can be correlated.
#[derive(Debug, Clone, PartialEq)]
pub struct Unparsable {
    pub id: Option<Id>,
    pub error: RpcError,
}

/// Parses one posted body.
pub fn parse(body: &[u8]) -> Result<Message, Unparsable> {
    let value: Value = serde_json::from_slice(body).map_err(|err| Unparsable {
        id: None,
        error: RpcError::new(code::PARSE_ERROR, format!("not JSON: {err}")),
    })?;
    let invalid = |id: Option<Id>, message: &str| Unparsable {
        id,
        error: RpcError::new(code::INVALID_REQUEST, message),
    };
    let Value::Object(mut object) = value else {
        return Err(invalid(
            None,
            "a message must be one JSON-RPC object (batches are not part of MCP)",
        ));
    };
    let id = match object.get("id") {
        None => None,
        Some(raw) => {
            Some(Id::parse(raw).ok_or_else(|| invalid(None, "id must be a string or an integer"))?)
        }
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(id, "jsonrpc must be \"2.0\""));
    }
    let Some(method) = object.get("method") else {
        let outcome = match (object.remove("result"), object.remove("error")) {
            (Some(Value::Object(result)), None) => Ok(result),
            (None, Some(error)) => Err(error),
            (Some(_), None) => return Err(invalid(id, "a response's result must be an object")),
            (Some(_), Some(_)) => {
                return Err(invalid(id, "a response has a result or an error, not both"));
            }
            (None, None) => return Err(invalid(id, "a request needs a method")),
        };
        return match id {
            Some(id) => Ok(Message::Response { id, outcome }),
            None => Err(invalid(None, "a response needs the id of its request")),
        };
    };
    let Some(method) = method.as_str() else {
        return Err(invalid(id, "method must be a string"));
    };
    let method = method.to_owned();
    // Moved out, not copied: a body may be megabytes.
    let params = match object.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => {
            return Err(Unparsable {
                id,
                error: RpcError::invalid_params("params must be an object"),
            });
        }
    };
    Ok(match id {
        Some(id) => Message::Request { id, method, params },
        None => Message::Notification { method, params },
    })
}

/// The response to request `id` (or to an unreadable one: `id` null).
pub fn response(id: Option<&Id>, outcome: Result<Value, RpcError>) -> Value {
    let id = id.map_or(Value::Null, |id| id.as_json().clone());
    match outcome {
        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() }),
    }
}

/// A notification the server sends.
pub fn notification(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "method": method, "params": params })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_parse_or_say_why_not() {
        let request = parse(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).expect("request");
        assert!(matches!(request, Message::Request { ref method, .. } if method == "ping"));
        let note = parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(matches!(note, Ok(Message::Notification { .. })));
        let answer = parse(br#"{"jsonrpc":"2.0","id":"s1","result":{"action":"accept"}}"#);
        assert!(
            matches!(&answer, Ok(Message::Response { outcome: Ok(result), .. }) if result["action"] == "accept"),
            "{answer:?}"
        );
        let failed = parse(br#"{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}"#);
        assert!(matches!(
            failed,
            Ok(Message::Response {
                outcome: Err(_),
                ..
            })
        ));
        for bad in [
            &br#"{"jsonrpc":"2.0","id":3,"result":[1]}"#[..],
            br#"{"jsonrpc":"2.0","id":3,"result":{},"error":{}}"#,
            br#"{"jsonrpc":"2.0","result":{}}"#,
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        for (body, code, has_id) in [
            (&b"{"[..], code::PARSE_ERROR, false),
            (b"[]", code::INVALID_REQUEST, false),
            (
                b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
                code::INVALID_REQUEST,
                false,
            ),
            (
                b"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}",
                code::INVALID_REQUEST,
                true,
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}",
                code::INVALID_REQUEST,
                false,
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}",
                code::INVALID_REQUEST,
                false,
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}",
                code::INVALID_REQUEST,
                true,
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":1}",
                code::INVALID_REQUEST,
                true,
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[1]}",
                code::INVALID_PARAMS,
                true,
            ),
            (b"\"text\"", code::INVALID_REQUEST, false),
        ] {
            let refused = parse(body).expect_err("refused");
            assert_eq!(
                refused.error.code,
                code,
                "{}",
                String::from_utf8_lossy(body)
            );
            assert_eq!(
                refused.id.is_some(),
                has_id,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    proptest::proptest! {
        /// Any bytes, and any JSON value: a message or a reason, never a panic.
        #[test]
        fn any_body_parses_or_is_refused(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn any_json_shape_parses_or_is_refused(
            id in "(1|\"a\"|null|1\\.5|\\{\\}|\\[\\])",
            method in "(\"ping\"|7|null|\\[\\])",
            params in "(\\{\\}|\\[\\]|7|null|\"x\")",
            version in "(\"2\\.0\"|\"1\\.0\"|2)",
        ) {
            let body = format!(r#"{{"jsonrpc":{version},"id":{id},"method":{method},"params":{params}}}"#);
            let _ = parse(body.as_bytes());
        }
    }

    #[test]
    fn responses_carry_the_id_and_one_outcome() {
        let id = Id::parse(&json!("a")).expect("id");
        assert_eq!(
            response(Some(&id), Ok(json!({}))),
            json!({"jsonrpc": "2.0", "id": "a", "result": {}})
        );
        assert_eq!(
            response(None, Err(RpcError::new(code::PARSE_ERROR, "x"))),
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "x"}})
        );
    }
}
