//! MCP progress for tasks (2025-11-25): a request may carry
//! `_meta.progressToken`; for a task it created, every progress message
//! until the task ends is sent as `notifications/progress` with that token.
//! The token is kept with the task so that any replica can send them.

use serde_json::Value;

use super::json::JsonObject;
use super::task::Task;

/// The longest token kept, as JSON text. Longer tokens get no progress
/// notifications rather than a refused call (progress is advisory).
pub const MAX_PROGRESS_TOKEN_BYTES: usize = 256;

/// A progress token (a JSON string or integer), as its JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressToken(String);

impl ProgressToken {
    /// The token of a JSON-RPC request (`params._meta.progressToken`), if
    /// it has a usable one.
    pub fn of_request(request: &JsonObject) -> Option<Self> {
        Self::from_value(request.params_meta()?.get("progressToken")?)
    }

    /// A token as stored (JSON text), if it still reads as one.
    pub fn from_stored(text: &str) -> Option<Self> {
        Self::from_value(&serde_json::from_str(text).ok()?)
    }

    fn from_value(token: &Value) -> Option<Self> {
        let usable = match token {
            Value::String(_) => true,
            Value::Number(n) => n.is_i64() || n.is_u64(),
            _ => false,
        };
        let text = token.to_string();
        (usable && text.len() <= MAX_PROGRESS_TOKEN_BYTES).then_some(Self(text))
    }

    /// The JSON text, as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The token as the notification carries it.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

/// The `progress` number of a task's progress notification: milliseconds
/// from its creation to its latest update. Tasks report progress as text
/// (the status message), and MCP wants a number that grows with each
/// notification; this one does, on every replica and after a reconnect,
/// without storing a counter.
pub fn progress_of(task: &Task) -> u64 {
    let elapsed = task.last_updated_at - task.created_at;
    u64::try_from(elapsed.num_milliseconds()).unwrap_or(0)
}

/// How often a running task's progress is written to its row at most
/// (PostgreSQL; in between, followers hear each message without a write).
pub const PROGRESS_WRITTEN_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether a progress report may skip its row: this replica wrote one of
/// the task's rows less than [`PROGRESS_WRITTEN_EVERY`] ago (`since`: how
/// long ago, `None`: not recently). The first report of a task, and the
/// first after a quiet spell, is written.
pub fn progress_may_wait(since_written: Option<std::time::Duration>) -> bool {
    since_written.is_some_and(|since| since < PROGRESS_WRITTEN_EVERY)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(meta: &str) -> JsonObject {
        JsonObject::parse(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","_meta":{meta}}}}}"#
        ))
        .expect("json")
    }

    #[test]
    fn string_and_integer_tokens_are_kept_others_are_not() {
        let token = ProgressToken::of_request(&request(r#"{"progressToken":"abc"}"#));
        assert_eq!(token.as_ref().map(ProgressToken::as_str), Some("\"abc\""));
        assert_eq!(
            token.map(|t| t.to_value()),
            Some(Value::String("abc".into()))
        );
        let number = ProgressToken::of_request(&request(r#"{"progressToken":42}"#));
        assert_eq!(number.map(|t| t.to_value()), Some(serde_json::json!(42)));
        for meta in [
            r#"{"progressToken":1.5}"#,
            r#"{"progressToken":null}"#,
            r#"{"progressToken":{"a":1}}"#,
            r#"{}"#,
        ] {
            assert_eq!(ProgressToken::of_request(&request(meta)), None, "{meta}");
        }
        let long = format!(r#"{{"progressToken":"{}"}}"#, "x".repeat(300));
        assert_eq!(ProgressToken::of_request(&request(&long)), None);
        assert_eq!(
            ProgressToken::from_stored("\"abc\"").map(|t| t.to_value()),
            Some(Value::String("abc".into()))
        );
        assert_eq!(ProgressToken::from_stored("not json"), None);
    }
}
