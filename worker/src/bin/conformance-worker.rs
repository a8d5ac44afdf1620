//! `conformance-worker`: `taskworker`'s runtime and flags serving the
//! conformance tools of `docs/worker-conformance.md` (`conf_echo`,
//! `conf_tool_error`, `conf_retryable`, `conf_back_off`, `conf_crash`, `conf_sleep`,
//! `conf_ask`, `conf_noop`): the Rust side of the cross-language worker
//! suite (`worker/tests/conformance/`) and of `benches/polyglot.sh`. It is
//! built with the workspace but never released (`deploy/build-release`
//! builds `taskstore` and `taskworker` only).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use taskworker::cli::{self, Program};
use taskworker::tools::builtin::Noop;
use taskworker::{
    AskError, RetryPolicy, Tool, ToolContext, ToolError, ToolInfo, error_result, text_result,
};

#[tokio::main]
async fn main() -> ExitCode {
    cli::main(Program {
        name: "conformance-worker",
        about: "Serves the worker conformance tools (docs/worker-conformance.md) with taskworker's runtime; --tools adds built-ins.",
        default_tools: "none",
        tools: vec![
            ("conf_echo", Arc::new(Echo)),
            ("conf_tool_error", Arc::new(ToolFailure)),
            ("conf_retryable", Arc::new(Retryable)),
            ("conf_back_off", Arc::new(BackOffOnce::default())),
            ("conf_crash", Arc::new(Crash)),
            ("conf_sleep", Arc::new(Sleep)),
            ("conf_ask", Arc::new(Ask)),
            // taskworker's own no-op: the same tool under the conformance name.
            ("conf_noop", Arc::new(Noop)),
        ],
    })
    .await
}

fn u64_argument(arguments: &Value, name: &str, default: u64) -> Result<u64, ToolError> {
    match arguments.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(value) => value.as_u64().ok_or_else(|| {
            ToolError::Permanent(format!("argument {name} must be a non-negative integer"))
        }),
    }
}

/// `{"text"}` → `text`.
struct Echo;

#[async_trait]
impl Tool for Echo {
    fn describe(&self) -> ToolInfo {
        ToolInfo::new(
            "Returns `text`.",
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        )
    }

    async fn call(&self, _ctx: ToolContext, arguments: Value) -> Result<Value, ToolError> {
        match arguments.get("text").and_then(Value::as_str) {
            Some(text) => Ok(text_result(text)),
            None => Err(ToolError::Permanent(
                "argument text must be a string".into(),
            )),
        }
    }
}

/// A result with `isError: true`: the task fails, not retried.
struct ToolFailure;

#[async_trait]
impl Tool for ToolFailure {
    fn describe(&self) -> ToolInfo {
        ToolInfo::new(
            "Returns a tool error (isError: true, text `tool error`).",
            json!({"type": "object", "properties": {}}),
        )
    }

    async fn call(&self, _ctx: ToolContext, _arguments: Value) -> Result<Value, ToolError> {
        Ok(error_result("tool error"))
    }
}

/// Fails retryably on attempts 1..=`fail_times`, then succeeds.
struct Retryable;

#[async_trait]
impl Tool for Retryable {
    fn describe(&self) -> ToolInfo {
        ToolInfo::new(
            "Fails retryably on attempts 1..=`fail_times`, then succeeds.",
            json!({"type": "object", "properties": {"fail_times": {"type": "integer", "minimum": 0}}}),
        )
        .with_retry(RetryPolicy {
            max_attempts: Some(4),
            backoff_base: Some(Duration::from_millis(50)),
            backoff_max: Some(Duration::from_millis(100)),
            retry_lost_workers: false,
            ..RetryPolicy::default()
        })
    }

    async fn call(&self, ctx: ToolContext, arguments: Value) -> Result<Value, ToolError> {
        let (attempt, _) = ctx.attempt();
        if u64::from(attempt) <= u64_argument(&arguments, "fail_times", 0)? {
            return Err(ToolError::Retryable(format!("failing attempt {attempt}")));
        }
        Ok(text_result(format!("succeeded on attempt {attempt}")))
    }
}

/// Backs its tool off for `wait_ms` on its first run of a task (in this
/// process), then succeeds.
#[derive(Default)]
struct BackOffOnce {
    backed_off: std::sync::Mutex<std::collections::HashSet<String>>,
}

#[async_trait]
impl Tool for BackOffOnce {
    fn describe(&self) -> ToolInfo {
        ToolInfo::new(
            "Backs its tool off for `wait_ms` on its first run of a task, then succeeds.",
            json!({"type": "object", "properties": {"wait_ms": {"type": "integer", "minimum": 0}}}),
        )
    }

    async fn call(&self, ctx: ToolContext, arguments: Value) -> Result<Value, ToolError> {
        let first = self
            .backed_off
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(ctx.task_id().to_owned());
        if first {
            let wait = Duration::from_millis(u64_argument(&arguments, "wait_ms", 0)?);
            return Err(ToolError::BackOff {
                until: std::time::SystemTime::now() + wait,
                message: "rate limited upstream".into(),
            });
        }
        Ok(text_result("ran after backing off"))
    }
}

/// Ends the worker process at once: a poison task.
struct Crash;

#[async_trait]
impl Tool for Crash {
    fn describe(&self) -> ToolInfo {
        ToolInfo::new(
            "Ends the worker process at once (exit status 137): a poison task.",
            json!({"type": "object", "properties": {}}),
        )
    }

    async fn call(&self, _ctx: ToolContext, _arguments: Value) -> Result<Value, ToolError> {
        std::process::exit(137)
    }
}

/// `step <i>` at the start of each step of `step_ms`, until `ms` have
/// passed or the task is cancelled.
struct Sleep;

#[async_trait]
impl Tool for Sleep {
    fn describe(&self) -> ToolInfo {
        ToolInfo::new(
            "Sleeps `ms` in steps of `step_ms` (default 100), reporting `step <i>` at the start of each; stops when cancelled.",
            json!({"type": "object", "properties": {
                "ms": {"type": "integer", "minimum": 0},
                "step_ms": {"type": "integer", "minimum": 1}
            }, "required": ["ms"]}),
        )
    }

    async fn call(&self, ctx: ToolContext, arguments: Value) -> Result<Value, ToolError> {
        let total = u64_argument(&arguments, "ms", 0)?;
        let step = u64_argument(&arguments, "step_ms", 100)?.max(1);
        let (mut slept, mut i) = (0, 1);
        while slept < total {
            ctx.progress(format!("step {i}")).await;
            let this = step.min(total - slept);
            tokio::select! {
                () = ctx.cancelled().cancelled() => return Err(ToolError::Cancelled),
                () = tokio::time::sleep(Duration::from_millis(this)) => {}
            }
            slept += this;
            i += 1;
        }
        Ok(text_result(format!("slept {total} ms")))
    }
}

/// Asks `Proceed?` under the key `confirm`; answers with the action.
struct Ask;

#[async_trait]
impl Tool for Ask {
    fn describe(&self) -> ToolInfo {
        ToolInfo::new(
            "Asks `Proceed?` (key `confirm`) and returns `answered <action>`.",
            json!({"type": "object", "properties": {}}),
        )
    }

    async fn call(&self, ctx: ToolContext, _arguments: Value) -> Result<Value, ToolError> {
        let request = json!({
            "method": "elicitation/create",
            "params": {"message": "Proceed?", "requestedSchema": {"type": "object", "properties": {}}},
        });
        let answer = match ctx.ask("confirm", request).await {
            Ok(answer) | Err(AskError::Declined(answer)) => answer,
            Err(other) => return Err(other.into()),
        };
        let action = answer
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or("none");
        Ok(text_result(format!("answered {action}")))
    }
}
