//! JSON payloads: checked for shape once, then kept as the exact text the
//! caller sent, so results come back byte for byte.

use serde_json::Value;

/// Why a JSON payload was refused; the caller adds the field name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidJson(pub String);

/// The text of a JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonObject(String);

impl JsonObject {
    pub fn parse(text: impl Into<String>) -> Result<Self, InvalidJson> {
        let text = text.into();
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(_)) => Ok(Self(text)),
            Ok(other) => Err(InvalidJson(format!(
                "must be a JSON object, not {}",
                kind(&other)
            ))),
            Err(err) => Err(InvalidJson(format!("is not valid JSON: {err}"))),
        }
    }

    /// `{"type":"object"}`: the JSON Schema of any object.
    pub fn open_object_schema() -> Self {
        Self(r#"{"type":"object"}"#.to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// `params.name` when this is a JSON-RPC `tools/call` request.
    pub fn tools_call_name(&self) -> Option<String> {
        // Only the two fields are decoded (the rest is skipped, not built
        // into a tree): this runs on every create, with up to 1 MiB of text.
        #[derive(serde::Deserialize)]
        struct Call<'a> {
            #[serde(borrow)]
            method: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow)]
            params: Option<Params<'a>>,
        }
        #[derive(serde::Deserialize)]
        struct Params<'a> {
            #[serde(borrow)]
            name: Option<std::borrow::Cow<'a, str>>,
        }
        let call: Call<'_> = serde_json::from_str(&self.0).ok()?;
        if call.method.as_deref() != Some("tools/call") {
            return None;
        }
        call.params?.name.map(std::borrow::Cow::into_owned)
    }

    /// `params._meta` of a JSON-RPC request, when it is an object: where a
    /// request's progress token, idempotency key and start time are read.
    /// Only that member is built into a tree; the rest (up to 1 MiB of
    /// arguments) is skipped.
    pub fn params_meta(&self) -> Option<serde_json::Map<String, Value>> {
        #[derive(serde::Deserialize)]
        struct Request {
            params: Option<Params>,
        }
        #[derive(serde::Deserialize)]
        struct Params {
            #[serde(rename = "_meta")]
            meta: Option<Value>,
        }
        let request: Request = serde_json::from_str(&self.0).ok()?;
        match request.params?.meta? {
            Value::Object(meta) => Some(meta),
            _ => None,
        }
    }
}

impl JsonObject {
    /// MCP's rule for a `tools/call` request: `params.arguments`, when
    /// present, is an object. Every edge that stores a request (gRPC,
    /// `/mcp`, the CLI before it sends one) asks this, so one rule holds
    /// for all. Other requests pass unchecked.
    pub fn check_tools_call_arguments(&self) -> Result<(), ArgumentsNotObject> {
        #[derive(serde::Deserialize)]
        struct Call<'a> {
            #[serde(borrow)]
            method: Option<std::borrow::Cow<'a, str>>,
            params: Option<Params>,
        }
        #[derive(serde::Deserialize)]
        struct Params {
            // `null` is a kind here, not an absent field.
            #[serde(default, deserialize_with = "present")]
            arguments: Option<Kind>,
        }
        fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Kind>, D::Error> {
            serde::Deserialize::deserialize(d).map(Some)
        }
        let Ok(call) = serde_json::from_str::<Call<'_>>(&self.0) else {
            // Not shaped like a JSON-RPC request: not a tools/call.
            return Ok(());
        };
        match (
            call.method.as_deref(),
            call.params.and_then(|p| p.arguments),
        ) {
            (Some("tools/call"), Some(Kind(kind))) if kind != "an object" => {
                Err(ArgumentsNotObject { kind })
            }
            _ => Ok(()),
        }
    }
}

/// A `tools/call` request whose `params.arguments` is not an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("params.arguments of a tools/call must be a JSON object, not {kind}")]
pub struct ArgumentsNotObject {
    /// What it is instead: `an array`, `a string`, `null`…
    pub kind: &'static str,
}

/// The kind of a JSON value, read without building it (arguments can be
/// large, and this runs on every create).
struct Kind(&'static str);

impl<'de> serde::Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Kind;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<Kind, E> {
                Ok(Kind("null"))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Kind, E> {
                Ok(Kind("a boolean"))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Kind, E> {
                Ok(Kind("a number"))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Kind, E> {
                Ok(Kind("a number"))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Kind, E> {
                Ok(Kind("a number"))
            }
            fn visit_str<E>(self, _: &str) -> Result<Kind, E> {
                Ok(Kind("a string"))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Kind, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Kind("an array"))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Kind, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Kind("an object"))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// A JSON-RPC request id, as JSON text: a string or a number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(String);

impl RequestId {
    /// Request ids longer than this are refused: JSON-RPC ids are short.
    pub const MAX_BYTES: usize = 1024;

    pub fn parse(text: impl Into<String>) -> Result<Self, InvalidJson> {
        let text = text.into();
        if text.len() > Self::MAX_BYTES {
            return Err(InvalidJson(format!(
                "is longer than {} bytes",
                Self::MAX_BYTES
            )));
        }
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::String(_) | Value::Number(_)) => Ok(Self(text)),
            Ok(other) => Err(InvalidJson(format!(
                "must be a JSON string or number, not {}",
                kind(&other)
            ))),
            Err(err) => Err(InvalidJson(format!("is not valid JSON: {err}"))),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_kept_verbatim() {
        let text = "{ \"b\": 1,\n \"a\": [true, null] }";
        assert_eq!(
            JsonObject::parse(text).map(|j| j.into_string()),
            Ok(text.to_owned())
        );
    }

    #[test]
    fn non_objects_and_garbage_are_refused() {
        for bad in ["", "[]", "1", "\"x\"", "null", "{", "{\"a\":}", "{} {}"] {
            assert!(JsonObject::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(JsonObject::parse(deep).is_err());
    }

    #[test]
    fn tools_call_name() {
        let call = |text: &str| JsonObject::parse(text).expect("object").tools_call_name();
        assert_eq!(
            call(r#"{"method":"tools/call","params":{"name":"echo"}}"#),
            Some("echo".into())
        );
        assert_eq!(
            call(r#"{"method":"tools/list","params":{"name":"echo"}}"#),
            None
        );
        assert_eq!(call(r#"{"method":"tools/call","params":{"name":7}}"#), None);
        assert_eq!(call(r#"{"method":"tools/call"}"#), None);
        assert_eq!(
            call(r#"{"params":{"name":"e\u0063ho","x":[1]},"method":"tools\/call"}"#),
            Some("echo".into()),
            "escapes and any field order"
        );
    }

    #[test]
    fn tools_call_arguments_must_be_objects() {
        let check = |text: &str| {
            JsonObject::parse(text)
                .expect("object")
                .check_tools_call_arguments()
        };
        for good in [
            r#"{"method":"tools/call","params":{"name":"echo","arguments":{"a":[1]}}}"#,
            r#"{"method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"method":"tools/call"}"#,
            r#"{"method":"other","params":{"arguments":[1]}}"#,
            r#"{"anything":"else"}"#,
            r#"{"method":7}"#,
        ] {
            assert_eq!(check(good), Ok(()), "{good}");
        }
        for (bad, kind) in [
            (
                r#"{"method":"tools/call","params":{"arguments":[1]}}"#,
                "an array",
            ),
            (
                r#"{"params":{"arguments":"x"},"method":"tools/call"}"#,
                "a string",
            ),
            (
                r#"{"method":"tools/call","params":{"arguments":null}}"#,
                "null",
            ),
            (
                r#"{"method":"tools/call","params":{"arguments":1.5}}"#,
                "a number",
            ),
        ] {
            assert_eq!(check(bad), Err(ArgumentsNotObject { kind }), "{bad}");
        }
    }

    #[test]
    fn request_ids_are_strings_or_numbers() {
        for good in ["7", "-1.5e3", "\"abc\"", " 7 "] {
            assert!(RequestId::parse(good).is_ok(), "{good:?}");
        }
        for bad in ["", "null", "{}", "[1]", "true", "abc", "\"open"] {
            assert!(RequestId::parse(bad).is_err(), "{bad:?}");
        }
    }
}
