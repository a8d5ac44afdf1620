//! The built-in tools: `echo`, `sleep`, `fail` and `hash`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::AskError;
use crate::tool::{Tool, ToolContext, ToolError, ToolInfo, text_result};

/// Names of the built-in tools.
pub const BUILTIN_TOOLS: &[&str] = &["echo", "sleep", "fail", "hash", "noop"];

/// A built-in tool by name.
pub fn builtin(name: &str) -> Option<Arc<dyn Tool>> {
    match name {
        "echo" => Some(Arc::new(Echo)),
        "sleep" => Some(Arc::new(Sleep)),
        "fail" => Some(Arc::new(Fail)),
        "hash" => Some(Arc::new(Hash)),
        "noop" => Some(Arc::new(Noop)),
        _ => None,
    }
}

fn u64_argument(arguments: &Value, name: &str, default: u64) -> Result<u64, ToolError> {
    match arguments.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(value) => value.as_u64().ok_or_else(|| {
            ToolError::Permanent(format!("argument {name} must be a non-negative integer"))
        }),
    }
}

/// Returns `arguments.text` (or the arguments themselves) as text.
#[derive(Debug)]
pub struct Echo;

#[async_trait]
impl Tool for Echo {
    fn describe(&self) -> ToolInfo {
        ToolInfo::new(
            "Returns `text` (or, without it, the arguments as JSON) as text.",
            json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        )
    }

    async fn call(&self, _ctx: ToolContext, arguments: Value) -> Result<Value, ToolError> {
        let text = match arguments.get("text").and_then(Value::as_str) {
            Some(text) => text.to_owned(),
            None => arguments.to_string(),
        };
        Ok(text_result(text))
    }
}

/// Sleeps `ms` milliseconds (default 1000, at most a day), reporting
/// progress every second; stops at once when cancelled. With `ask`, it
/// first asks its caller that question (an elicitation, under the key
/// `ask`) and sleeps once it is accepted; a declined question ends it
/// without sleeping.
#[derive(Debug)]
pub struct Sleep;

const MAX_SLEEP_MS: u64 = 24 * 60 * 60 * 1000;

#[async_trait]
impl Tool for Sleep {
    fn describe(&self) -> ToolInfo {
        ToolInfo::new(
            "Sleeps `ms` milliseconds, reporting progress every second; with `ask`, first asks that question and sleeps once it is accepted.",
            json!({"type": "object", "properties": {
                "ms": {"type": "integer", "minimum": 0, "maximum": MAX_SLEEP_MS},
                "ask": {"type": "string"}
            }}),
        )
    }

    async fn call(&self, ctx: ToolContext, arguments: Value) -> Result<Value, ToolError> {
        let total = u64_argument(&arguments, "ms", 1000)?.min(MAX_SLEEP_MS);
        if let Some(question) = arguments.get("ask").and_then(Value::as_str) {
            let schema = json!({"type": "object", "properties": {}});
            match ctx.elicit("ask", question, schema).await {
                Ok(_) => ctx.progress("answered; sleeping").await,
                Err(AskError::Declined(answer)) => {
                    let what = match answer.get("action").and_then(Value::as_str) {
                        Some("cancel") => "dismissed",
                        _ => "declined",
                    };
                    return Ok(text_result(format!("not slept: the question was {what}")));
                }
                Err(other) => return Err(other.into()),
            }
        }
        let mut slept = 0;
        while slept < total {
            let step = (total - slept).min(1000);
            tokio::select! {
                () = ctx.cancelled().cancelled() => return Err(ToolError::Cancelled),
                () = tokio::time::sleep(Duration::from_millis(step)) => {}
            }
            slept += step;
            if slept < total {
                ctx.progress(format!("slept {slept} of {total} ms")).await;
            }
        }
        Ok(text_result(format!("slept {total} ms")))
    }
}

/// Fails: `retryable` (default false) picks the kind of error, `message`
/// its text. With `until_attempt: n` it fails only while the attempt number
/// is at most n, then succeeds (for trying retries).
#[derive(Debug)]
pub struct Fail;

#[async_trait]
impl Tool for Fail {
    fn describe(&self) -> ToolInfo {
        ToolInfo::new(
            "Fails with `message`: retryable or not; with `until_attempt`, succeeds after that attempt.",
            json!({"type": "object", "properties": {
                "message": {"type": "string"},
                "retryable": {"type": "boolean"},
                "until_attempt": {"type": "integer", "minimum": 0}
            }}),
        )
    }

    async fn call(&self, ctx: ToolContext, arguments: Value) -> Result<Value, ToolError> {
        let (attempt, _) = ctx.attempt();
        let until = u64_argument(&arguments, "until_attempt", u64::MAX)?;
        if u64::from(attempt) > until {
            return Ok(text_result(format!("succeeded on attempt {attempt}")));
        }
        let message = arguments
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("the fail tool failed, as asked")
            .to_owned();
        if arguments
            .get("retryable")
            .and_then(Value::as_bool)
            .unwrap_or(false)
        {
            Err(ToolError::Retryable(message))
        } else {
            Err(ToolError::Permanent(message))
        }
    }
}

/// CPU-bound: hashes `items` items (default 100000, at most 10^9) in a
/// SHA-256 chain, reporting progress every tenth, on the blocking pool.
#[derive(Debug)]
pub struct Hash;

const MAX_HASH_ITEMS: u64 = 1_000_000_000;

#[async_trait]
impl Tool for Hash {
    fn describe(&self) -> ToolInfo {
        ToolInfo::new(
            "CPU-bound: a SHA-256 chain over `items` items, reporting progress every tenth.",
            json!({"type": "object", "properties": {
                "items": {"type": "integer", "minimum": 0, "maximum": MAX_HASH_ITEMS}
            }}),
        )
    }

    async fn call(&self, ctx: ToolContext, arguments: Value) -> Result<Value, ToolError> {
        let items = u64_argument(&arguments, "items", 100_000)?.min(MAX_HASH_ITEMS);
        let chunk = (items / 10).max(1);
        let mut digest = [0u8; 32];
        let mut done = 0;
        while done < items {
            if ctx.cancelled().is_cancelled() {
                return Err(ToolError::Cancelled);
            }
            let count = chunk.min(items - done);
            let start = done;
            digest = tokio::task::spawn_blocking(move || {
                let mut digest = digest;
                for item in start..start + count {
                    let mut hasher = Sha256::new();
                    hasher.update(digest);
                    hasher.update(item.to_le_bytes());
                    digest = hasher.finalize().into();
                }
                digest
            })
            .await
            .map_err(|err| ToolError::Permanent(format!("hashing failed: {err}")))?;
            done += count;
            ctx.progress(format!("hashed {done} of {items} items"))
                .await;
        }
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        Ok(text_result(format!("sha256 chain of {items} items: {hex}")))
    }
}

/// Does nothing; its text is the Unix time in microseconds at which it
/// started, so a load generator can measure create→worker-start.
#[derive(Debug)]
pub struct Noop;

#[async_trait]
impl Tool for Noop {
    fn describe(&self) -> ToolInfo {
        ToolInfo::new(
            "Does nothing (for `ms` milliseconds, default 0, silently); answers the Unix time in microseconds at which it started.",
            json!({"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": MAX_SLEEP_MS}}}),
        )
    }

    async fn call(&self, ctx: ToolContext, arguments: Value) -> Result<Value, ToolError> {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros())
            .unwrap_or(0);
        let ms = u64_argument(&arguments, "ms", 0)?.min(MAX_SLEEP_MS);
        if ms > 0 {
            tokio::select! {
                () = ctx.cancelled().cancelled() => return Err(ToolError::Cancelled),
                () = tokio::time::sleep(std::time::Duration::from_millis(ms)) => {}
            }
        }
        Ok(text_result(started.to_string()))
    }
}
