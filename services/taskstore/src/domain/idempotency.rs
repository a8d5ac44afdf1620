//! Idempotent creates: a create that carries an idempotency key returns the
//! task the key's first create made, instead of a second task, as long as
//! that task lives and the key's retention has not passed. Every backend
//! finds the key's task its own way and asks [`replay`] what to do with it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::ids::SessionId;
use super::json::JsonObject;

/// The longest key accepted, in bytes.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 255;

/// The `_meta` entry of an MCP `tools/call` that carries the key (a string).
pub const IDEMPOTENCY_META_KEY: &str = "mcp-taskstore/idempotency-key";

/// How long a key is honoured after its task's creation, unless the
/// operator says otherwise (`--idempotency-retention`): long enough for any
/// client's retries, short enough that keys do not pile up.
pub const DEFAULT_IDEMPOTENCY_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// A caller's idempotency key: 1 to 255 bytes of UTF-8 without control
/// characters, unique per tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

/// Why a raw key was refused; the caller adds the field name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be 1 to 255 bytes of text without control characters")]
pub struct InvalidIdempotencyKey;

impl IdempotencyKey {
    pub fn parse(raw: &str) -> Result<Self, InvalidIdempotencyKey> {
        let well_formed = !raw.is_empty()
            && raw.len() <= MAX_IDEMPOTENCY_KEY_BYTES
            && !raw.chars().any(char::is_control);
        if well_formed {
            Ok(Self(raw.to_owned()))
        } else {
            Err(InvalidIdempotencyKey)
        }
    }

    /// The key an MCP request carries in its `params._meta`
    /// ([`JsonObject::params_meta`]), if any. A value that is not a
    /// well-formed key is refused, not ignored: a client that asked for
    /// idempotency must not silently get a second task.
    pub fn of_meta(
        meta: Option<&Map<String, Value>>,
    ) -> Result<Option<Self>, InvalidIdempotencyKey> {
        match meta.and_then(|meta| meta.get(IDEMPOTENCY_META_KEY)) {
            None => Ok(None),
            Some(Value::String(raw)) => Self::parse(raw).map(Some),
            Some(_) => Err(InvalidIdempotencyKey),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The task a key already names, as a backend found it (live: an expired
/// task frees its key).
#[derive(Debug, Clone, Copy)]
pub struct KeyedTask<'a> {
    pub created_at: DateTime<Utc>,
    pub session: Option<&'a SessionId>,
    pub request: &'a JsonObject,
}

/// The create that carries the key again.
#[derive(Debug, Clone, Copy)]
pub struct KeyedCreate<'a> {
    pub session: Option<&'a SessionId>,
    pub request: &'a JsonObject,
    pub now: DateTime<Utc>,
    pub retention: Duration,
}

/// What a keyed create does with the task its key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// The same call again: answer with the existing task, create nothing.
    Existing,
    /// The key's retention has passed: it is free, create a new task.
    Expired,
    /// The key names another call (other arguments, another tool, or a task
    /// of another session): refused, so that a reused key never hands one
    /// caller another's task.
    InUse,
}

/// The decision for one keyed create.
pub fn replay(existing: KeyedTask<'_>, create: KeyedCreate<'_>) -> Replay {
    let retention = chrono::Duration::from_std(create.retention).unwrap_or(chrono::Duration::MAX);
    let retained_until = existing
        .created_at
        .checked_add_signed(retention)
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    if create.now >= retained_until {
        return Replay::Expired;
    }
    // A session-bound caller sees only its session's tasks; a tenant-wide
    // one sees them all.
    let visible = create.session.is_none() || create.session == existing.session;
    if visible && same_call(existing.request, create.request) {
        Replay::Existing
    } else {
        Replay::InUse
    }
}

/// Whether two requests ask for the same thing: the same method and
/// parameters, apart from what a retry may change (the JSON-RPC id, the
/// `_meta` with its progress token, and `params.task`).
pub fn same_call(a: &JsonObject, b: &JsonObject) -> bool {
    match (call_of(a), call_of(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

fn call_of(request: &JsonObject) -> Option<(Value, Value)> {
    let mut request: Value = serde_json::from_str(request.as_str()).ok()?;
    let method = request.get("method").cloned().unwrap_or(Value::Null);
    let mut params = request
        .get_mut("params")
        .map(Value::take)
        .unwrap_or(Value::Null);
    if let Some(params) = params.as_object_mut() {
        params.remove("_meta");
        params.remove("task");
    }
    Some((method, params))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(text: &str) -> JsonObject {
        JsonObject::parse(text).expect("json object")
    }

    const ECHO_HI: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi","n":1}}}"#;

    #[test]
    fn keys_are_bounded_text() {
        assert!(IdempotencyKey::parse("order-7/retry").is_ok());
        assert!(IdempotencyKey::parse("ключ").is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(MAX_IDEMPOTENCY_KEY_BYTES)).is_ok());
        for bad in [
            String::new(),
            "k".repeat(MAX_IDEMPOTENCY_KEY_BYTES + 1),
            "a\nb".to_owned(),
            "a\u{0}b".to_owned(),
        ] {
            assert_eq!(
                IdempotencyKey::parse(&bad),
                Err(InvalidIdempotencyKey),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn an_mcp_request_carries_its_key_in_meta() {
        let with = |meta: &str| {
            call(&format!(
                r#"{{"method":"tools/call","params":{{"name":"echo","_meta":{meta}}}}}"#
            ))
            .params_meta()
        };
        assert_eq!(
            IdempotencyKey::of_meta(with(r#"{"mcp-taskstore/idempotency-key":"k1"}"#).as_ref()),
            Ok(Some(IdempotencyKey("k1".into())))
        );
        assert_eq!(
            IdempotencyKey::of_meta(with(r#"{"progressToken":3}"#).as_ref()),
            Ok(None)
        );
        assert_eq!(
            IdempotencyKey::of_meta(call(ECHO_HI).params_meta().as_ref()),
            Ok(None)
        );
        for bad in [
            r#"{"mcp-taskstore/idempotency-key":7}"#,
            r#"{"mcp-taskstore/idempotency-key":""}"#,
            r#"{"mcp-taskstore/idempotency-key":null}"#,
        ] {
            assert_eq!(
                IdempotencyKey::of_meta(with(bad).as_ref()),
                Err(InvalidIdempotencyKey),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_retry_is_the_same_call_whatever_its_id_meta_and_task() {
        let retry = call(
            r#"{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"arguments":{"n":1,"text":"hi"},"name":"echo","task":{"ttl":5},"_meta":{"progressToken":9}}}"#,
        );
        assert!(same_call(&call(ECHO_HI), &retry));
        for other in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"ho","n":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"text":"hi","n":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"echo","arguments":{"text":"hi","n":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
        ] {
            assert!(!same_call(&call(ECHO_HI), &call(other)), "{other}");
        }
    }

    #[test]
    fn replay_table() {
        let created = DateTime::from_timestamp(1_000_000, 0).expect("time");
        let hour = Duration::from_secs(3600);
        let ours = SessionId::parse("s1", 64).expect("session");
        let theirs = SessionId::parse("s2", 64).expect("session");
        let echo = call(ECHO_HI);
        let other = call(r#"{"method":"tools/call","params":{"name":"sleep"}}"#);
        let at = |secs: i64| created + chrono::Duration::seconds(secs);
        // (task's session, caller's session, caller's request, seconds after creation, decision)
        let table = [
            (None, None, &echo, 0, Replay::Existing),
            (None, None, &echo, 3599, Replay::Existing),
            (None, None, &echo, 3600, Replay::Expired),
            (None, None, &other, 10, Replay::InUse),
            (None, None, &other, 3600, Replay::Expired),
            (Some(&ours), Some(&ours), &echo, 10, Replay::Existing),
            (Some(&ours), None, &echo, 10, Replay::Existing),
            (Some(&ours), Some(&theirs), &echo, 10, Replay::InUse),
            (None, Some(&ours), &echo, 10, Replay::InUse),
            (Some(&ours), Some(&theirs), &echo, 3600, Replay::Expired),
        ];
        for (task_session, caller_session, request, after, expected) in table {
            let decision = replay(
                KeyedTask {
                    created_at: created,
                    session: task_session,
                    request: &echo,
                },
                KeyedCreate {
                    session: caller_session,
                    request,
                    now: at(after),
                    retention: hour,
                },
            );
            assert_eq!(
                decision, expected,
                "{task_session:?} {caller_session:?} {after}"
            );
        }
    }

    #[test]
    fn an_endless_retention_never_overflows() {
        let existing = call(ECHO_HI);
        let decision = replay(
            KeyedTask {
                created_at: DateTime::<Utc>::MAX_UTC - chrono::Duration::seconds(1),
                session: None,
                request: &existing,
            },
            KeyedCreate {
                session: None,
                request: &existing,
                now: DateTime::<Utc>::MAX_UTC - chrono::Duration::seconds(1),
                retention: Duration::MAX,
            },
        );
        assert_eq!(decision, Replay::Existing);
    }
}
