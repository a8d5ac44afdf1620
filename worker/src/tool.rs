//! What a tool is: an async handler that gets the call's arguments and a
//! [`ToolContext`], and returns a `CallToolResult`-shaped JSON object.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::asking::{self, AskError};
use crate::control::Control;
use crate::report::Reporter;

/// How a tool call can fail. A result with `isError: true` is not a failure
/// of the call: return it as `Ok` and the task ends FAILED with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// A retry may succeed (a timeout, an upstream outage): the task is
    /// dispatched again after a backoff, until its attempts run out.
    #[error("retryable: {0}")]
    Retryable(String),
    /// A retry cannot succeed: the task ends FAILED with this message.
    #[error("{0}")]
    Permanent(String),
    /// The tool stopped because its cancellation token fired.
    #[error("cancelled")]
    Cancelled,
    /// What the tool calls told it to wait (an HTTP 429 or 503 with
    /// Retry-After): the attempt does not count, the task runs again at
    /// `until`, and every other task of its key (the tool's rate key, else
    /// its concurrency key, else the whole tool) waits until then too (at
    /// most 24 h ahead).
    #[error("backing off: {message}")]
    BackOff {
        until: std::time::SystemTime,
        message: String,
    },
}

/// A tool a worker serves.
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// Runs one call. Long-running tools should watch
    /// [`ToolContext::cancelled`] and return [`ToolError::Cancelled`] soon
    /// after it fires.
    async fn call(&self, ctx: ToolContext, arguments: Value) -> Result<Value, ToolError>;

    /// What MCP clients are told about the tool (`tools/list` of
    /// `taskstore mcp`): by default, any arguments, task optional.
    fn describe(&self) -> ToolInfo {
        ToolInfo::default()
    }
}

/// MCP `execution.taskSupport`: whether a client may, must or must not call
/// the tool as a task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskSupport {
    #[default]
    Optional,
    Required,
    Forbidden,
}

/// A tool's description for MCP clients.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolInfo {
    pub title: Option<String>,
    pub description: Option<String>,
    /// The JSON Schema of the arguments (an object); `None`: any object.
    pub input_schema: Option<Value>,
    pub task_support: TaskSupport,
    /// How its tasks are retried; `None`: the service's policy.
    pub retry: Option<RetryPolicy>,
    /// At most how many of its tasks run at once per key; `None`: no limit.
    pub concurrency: Option<ConcurrencyLimit>,
    /// At most how many of its tasks start per window per key; `None`: no
    /// limit.
    pub rate: Option<RateLimit>,
    /// Within a tenant, the key whose values take turns when its tasks
    /// wait for room (terms as [`ConcurrencyLimit::key`], e.g.
    /// `"arguments.customer_id"`); `None`: first in, first out.
    pub fairness_key: Option<String>,
}

/// "At most `starts` of this tool's tasks start within any `per`, per value
/// of `key`" (a key as [`ConcurrencyLimit::key`]), across every replica of
/// the service; further tasks of the key wait, spending no attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    /// 1 to 100,000.
    pub starts: u32,
    /// 10 ms to 24 h.
    pub per: std::time::Duration,
    pub key: String,
}

/// "At most `max` of this tool's tasks run at once per value of `key`",
/// sent to the service with the tool's description; the service holds a
/// key's further tasks back (they spend no attempt) until one ends. The
/// service checks it: a bad one is refused when the worker registers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConcurrencyLimit {
    /// 1 to 10,000.
    pub max: u32,
    /// Comma-separated terms: `tenant`, `tool`, `session`,
    /// `arguments.<path>` (e.g. `"tenant, arguments.customer_id"`); empty:
    /// one key for the whole tool, across tenants.
    #[serde(default)]
    pub key: String,
}

/// A tool's retry policy, sent to the service with its description. What
/// is left out is the service's; a task keeps the policy its tool had when
/// it was created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts a task gets when its caller asks for no number (1 to 100;
    /// 1: never retried).
    pub max_attempts: Option<u32>,
    /// The first retry's backoff ceiling (10 ms to 24 h); doubles per
    /// attempt, with jitter.
    pub backoff_base: Option<std::time::Duration>,
    /// The longest backoff.
    pub backoff_max: Option<std::time::Duration>,
    /// false: a [`ToolError::Retryable`] fails the task at once.
    pub retry_errors: bool,
    /// false: a task whose worker was lost mid-attempt (killed, frozen, cut
    /// off) fails rather than running again: for tools whose half-done
    /// work must not be repeated.
    pub retry_lost_workers: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: None,
            backoff_base: None,
            backoff_max: None,
            retry_errors: true,
            retry_lost_workers: true,
        }
    }
}

impl ToolInfo {
    /// A description and the schema of the arguments.
    pub fn new(description: impl Into<String>, input_schema: Value) -> Self {
        Self {
            description: Some(description.into()),
            input_schema: Some(input_schema),
            ..Self::default()
        }
    }

    /// With a retry policy of its own.
    pub fn with_retry(self, retry: RetryPolicy) -> Self {
        Self {
            retry: Some(retry),
            ..self
        }
    }

    /// With at most `starts` tasks starting within any `per`, per value of
    /// `key` ([`RateLimit`]).
    pub fn with_rate(self, starts: u32, per: std::time::Duration, key: impl Into<String>) -> Self {
        Self {
            rate: Some(RateLimit {
                starts,
                per,
                key: key.into(),
            }),
            ..self
        }
    }

    /// With the values of `key` taking turns within a tenant when its
    /// tasks wait for room ([`ToolInfo::fairness_key`]).
    pub fn with_fairness_key(self, key: impl Into<String>) -> Self {
        Self {
            fairness_key: Some(key.into()),
            ..self
        }
    }

    /// With at most `max` tasks running at once per value of `key`
    /// ([`ConcurrencyLimit`]).
    pub fn with_concurrency(self, max: u32, key: impl Into<String>) -> Self {
        Self {
            concurrency: Some(ConcurrencyLimit {
                max,
                key: key.into(),
            }),
            ..self
        }
    }
}

/// What a running tool can do besides computing its result.
#[derive(Debug, Clone)]
pub struct ToolContext {
    control: Arc<Control>,
    reporter: Reporter,
    attempt: u32,
    max_attempts: u32,
}

impl ToolContext {
    pub(crate) fn new(
        control: Arc<Control>,
        reporter: Reporter,
        attempt: u32,
        max_attempts: u32,
    ) -> Self {
        Self {
            control,
            reporter,
            attempt,
            max_attempts,
        }
    }

    /// Fires when the task was cancelled, the lease was lost, the worker is
    /// shutting down, or a question waits without a worker: stop, nothing
    /// will be stored.
    pub fn cancelled(&self) -> &CancellationToken {
        &self.control.cancel
    }

    /// Asks the task's caller a question and waits for the answer: an MCP
    /// input request (`{"method": "elicitation/create" | "sampling/createMessage"
    /// | "roots/list", "params": {…}}`) under `key`, which names this
    /// question for the task's whole life (never reuse it for another
    /// request). The task is `input_required` until the caller answers (MCP
    /// clients through `/mcp`, `taskstore answer`, AnswerInputRequests).
    ///
    /// Returns the caller's result (an `ElicitResult`,
    /// `CreateMessageResult` or `ListRootsResult`). A key answered before
    /// answers at once, so an attempt run again after a crash or a park
    /// gets every answer without asking twice. See [`AskError`] for why
    /// there may be none; `?` turns it into the right [`ToolError`].
    pub async fn ask(&self, key: &str, request: Value) -> Result<Value, AskError> {
        asking::ask(&self.reporter, &self.control, key, &request).await
    }

    /// [`ToolContext::ask`] for an `elicitation/create` form: `message`
    /// and the JSON Schema of what to fill in; the filled-in `content` of an
    /// accepted answer.
    pub async fn elicit(&self, key: &str, message: &str, schema: Value) -> Result<Value, AskError> {
        let request = json!({
            "method": "elicitation/create",
            "params": { "message": message, "requestedSchema": schema },
        });
        let answer = self.ask(key, request).await?;
        Ok(answer.get("content").cloned().unwrap_or(Value::Null))
    }

    /// The task this attempt runs.
    pub fn task_id(&self) -> &str {
        &self.reporter.task_id
    }

    /// This attempt's number, from 1, and how many there may be.
    pub fn attempt(&self) -> (u32, u32) {
        (self.attempt, self.max_attempts)
    }

    /// Sets the task's status message (status WORKING). When the service
    /// refuses it because the attempt is over (the task ended, another
    /// claim holds it), the attempt stops, as its follow would stop it.
    pub async fn progress(&self, message: impl Into<String>) {
        if let Some(reason) = self.reporter.working(message.into()).await {
            self.control.stop(reason);
        }
    }

    /// Moves the task to INPUT_REQUIRED with a message saying what is needed.
    pub async fn input_required(&self, message: impl Into<String>) {
        if let Some(reason) = self.reporter.input_required(message.into()).await {
            self.control.stop(reason);
        }
    }
}

/// A `CallToolResult` with one text item.
pub fn text_result(text: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": text.into() }], "isError": false })
}

/// A `CallToolResult` with `isError: true` and one text item.
pub fn error_result(text: impl Into<String>) -> Value {
    taskstore_proto::protocol::error_result(&text.into())
}

/// Whether a result says the call failed (MCP: `isError: true` → failed).
pub fn is_error(result: &Value) -> bool {
    result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// `?` in a tool: a stopped or parked wait ends the call as a cancellation
/// (the attempt then stores nothing or gives the task back); a declined or
/// refused question fails the call.
impl From<AskError> for ToolError {
    fn from(err: AskError) -> Self {
        match err {
            AskError::Stopped | AskError::Parked => ToolError::Cancelled,
            AskError::Declined(_) | AskError::Refused(_) => ToolError::Permanent(err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_unanswered_question_ends_the_call_as_its_reason_says() {
        assert_eq!(
            ToolError::from(AskError::Parked),
            ToolError::Cancelled,
            "a parked wait ends the call; the attempt gives the task back"
        );
        assert!(matches!(
            ToolError::from(AskError::Declined(json!({"action": "decline"}))),
            ToolError::Permanent(message) if message.contains("decline")
        ));
    }
}
