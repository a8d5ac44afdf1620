//! `create`: its flags, parsed into a new task before anything is sent, and
//! the warning when no worker serves a dispatched task's tool.

use super::exit::{ClientError, Label, report};
use super::input::{Inputs, tool_arg};
use crate::config::CreateArgs;
use crate::domain::{
    DispatchRequest, FleetPolicy, IdempotencyKey, JsonObject, NewTask, Priority, RequestId,
    StartTime, TaskId, ToolName, Ttl,
};
use crate::grpc::GrpcTaskStore;

/// What a valid `--arguments` looks like, for error messages.
const ARGUMENTS_EXAMPLE: &str = r#"{"text":"hi"}"#;
const REQUEST_EXAMPLE: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#;

pub(super) fn new_task(flags: CreateArgs) -> Result<NewTask, ClientError> {
    let mut inputs = Inputs::default();
    let request_id = serde_json::from_str::<serde_json::Value>(&flags.request_id)
        .ok()
        .filter(|id| id.is_string() || id.is_number())
        .ok_or_else(|| {
            ClientError::Usage(format!(
                "--request-id {:?} must be JSON: a number such as 7, or a string such as '\"abc\"'",
                flags.request_id
            ))
        })?;
    let request = match (flags.request, &flags.tool) {
        (Some(raw), _) => inputs.json("--request", &raw, REQUEST_EXAMPLE)?,
        (None, Some(tool)) => {
            let arguments = match &flags.arguments {
                Some(raw) => inputs.json("--arguments", raw, ARGUMENTS_EXAMPLE)?,
                None => "{}".to_owned(),
            };
            tools_call(tool, &arguments, request_id.clone())?
        }
        (None, None) => {
            return Err(ClientError::Usage(format!(
                "create needs --tool NAME (with --arguments JSON) or --request JSON, e.g. \
                 taskstore create --tool echo --arguments '{ARGUMENTS_EXAMPLE}' --dispatch"
            )));
        }
    };
    let request =
        JsonObject::parse(request).map_err(|err| ClientError::Usage(format!("--request {err}")))?;
    let dispatch = if flags.dispatch {
        let tool = match &flags.tool {
            Some(tool) => tool_arg(tool)?,
            None => request
                .tools_call_name()
                .ok_or_else(|| {
                    ClientError::Usage(
                        "--dispatch needs a tools/call request (or use --tool)".to_owned(),
                    )
                })
                .and_then(|name| tool_arg(&name))?,
        };
        Some(DispatchRequest {
            fairness: None,
            rate: None,
            concurrency: None,
            // The service gives the task its tool's.
            retry: Default::default(),
            tool,
            max_attempts: flags.max_attempts,
            start: start_arg(flags.start_at.as_deref(), flags.start_after.as_deref())?,
            priority: flags
                .priority
                .map(|raw| Priority::parse(raw, Priority::MAX))
                .transpose()
                .map_err(|err| ClientError::Usage(format!("--priority {err}")))?
                .unwrap_or_default(),
        })
    } else {
        None
    };
    Ok(NewTask {
        task_id: flags
            .task_id
            .as_deref()
            .map(|raw| {
                TaskId::parse(raw).map_err(|err| ClientError::Usage(format!("--task-id {err}")))
            })
            .transpose()?,
        ttl: flags.ttl.as_deref().map(ttl_arg).transpose()?.into(),
        poll_interval: None,
        request_id: RequestId::parse(request_id.to_string())
            .map_err(|err| ClientError::Usage(format!("--request-id {err}")))?,
        request,
        dispatch,
        // The client's span travels in the call's metadata.
        trace_context: None,
        idempotency_key: flags
            .idempotency_key
            .as_deref()
            .map(|raw| {
                IdempotencyKey::parse(raw)
                    .map_err(|err| ClientError::Usage(format!("--idempotency-key {err}")))
            })
            .transpose()?,
    })
}

/// A JSON-RPC `tools/call` request for `tool` with `arguments` (JSON text).
fn tools_call(
    tool: &str,
    arguments: &str,
    request_id: serde_json::Value,
) -> Result<String, ClientError> {
    let arguments: serde_json::Value = serde_json::from_str(arguments)
        .map_err(|err| ClientError::Usage(format!("--arguments must be JSON ({err})")))?;
    let request = serde_json::json!({
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": { "name": tool, "arguments": arguments, "task": {} },
    })
    .to_string();
    // The service refuses it too; said here, before connecting, as a
    // usage error about the flag.
    if let Ok(parsed) = JsonObject::parse(request.as_str())
        && let Err(err) = parsed.check_tools_call_arguments()
    {
        return Err(ClientError::Usage(format!(
            "--arguments must be a JSON object, not {}, e.g. --arguments '{ARGUMENTS_EXAMPLE}'",
            err.kind
        )));
    }
    Ok(request)
}

/// `--start-at` or `--start-after`, checked for shape here; the service
/// checks the bounds.
fn start_arg(at: Option<&str>, after: Option<&str>) -> Result<Option<StartTime>, ClientError> {
    if let Some(raw) = at {
        let at = chrono::DateTime::parse_from_rfc3339(raw).map_err(|_| {
            ClientError::Usage(format!(
                "--start-at {raw:?} must be an RFC 3339 time, e.g. 2026-12-01T14:00:00Z"
            ))
        })?;
        return Ok(Some(StartTime::At(at.with_timezone(&chrono::Utc))));
    }
    after
        .map(|raw| {
            crate::durations::parse_duration(raw)
                .map(StartTime::After)
                .map_err(|err| ClientError::Usage(format!("--start-after {err}")))
        })
        .transpose()
}

fn ttl_arg(raw: &str) -> Result<Ttl, ClientError> {
    let example = "give a duration such as 30m, 2h or 7d";
    if matches!(raw, "unlimited" | "none" | "off" | "forever") {
        return Err(ClientError::Usage(format!(
            "--ttl {raw}: a task that never expires cannot be requested (the service's --max-ttl \
             bounds every task); {example}"
        )));
    }
    let duration = crate::durations::parse_duration(raw)
        .map_err(|err| ClientError::Usage(format!("--ttl {err}; {example}")))?;
    Ttl::from_duration(duration).map_err(|err| ClientError::Usage(format!("--ttl {err}")))
}

/// After a dispatched create: warn when no worker has served the tool
/// recently, so a typo does not wait silently. Best effort: a service that
/// cannot say (an older version) gets no warning.
pub(super) async fn warn_if_unserved(store: &GrpcTaskStore, tool: &ToolName) {
    let Ok(served) = store.list_tools().await else {
        return;
    };
    if let Some(served) = served.iter().find(|served| served.name == tool.as_str()) {
        if served.consuming == 0 {
            report(
                Label::Warning,
                &format!(
                    "tool {:?} has workers, but none consumes its queue (they cannot reach the job queue): the task waits until one does",
                    tool.as_str()
                ),
            );
        }
        return;
    }
    let names: Vec<&str> = served.iter().map(|t| t.name.as_str()).collect();
    let serving = if names.is_empty() {
        "no worker serves any tool now".to_owned()
    } else {
        format!("served now: {}", names.join(", "))
    };
    let guess = names
        .iter()
        .map(|name| (strsim::jaro_winkler(name, tool.as_str()), *name))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| format!("; did you mean {name:?}?"))
        .unwrap_or_default();
    let window = humantime::format_duration(FleetPolicy::default().seen_within);
    report(
        Label::Warning,
        &format!(
            "no worker has served tool {:?} in the last {window}: the task waits until one does ({serving}{guess})",
            tool.as_str()
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> CreateArgs {
        CreateArgs {
            priority: Default::default(),
            request: None,
            tool: Some("echo".into()),
            arguments: None,
            request_id: "1".into(),
            task_id: None,
            ttl: None,
            dispatch: true,
            max_attempts: None,
            idempotency_key: None,
            start_at: None,
            start_after: None,
        }
    }

    #[test]
    fn create_flags_become_a_tools_call() {
        let task = new_task(CreateArgs {
            arguments: Some(r#"{"text":"hi"}"#.into()),
            request_id: r#""abc""#.into(),
            ..flags()
        })
        .expect("valid flags");
        assert_eq!(task.request.tools_call_name().as_deref(), Some("echo"));
        assert_eq!(task.request_id.as_str(), r#""abc""#);
        assert_eq!(
            task.dispatch.map(|d| d.tool.to_string()),
            Some("echo".into())
        );
    }

    #[test]
    fn bad_create_flags_say_what_to_write() {
        let usage = |flags| match new_task(flags) {
            Err(ClientError::Usage(message)) => message,
            other => panic!("a usage error expected, got {other:?}"),
        };
        assert!(
            usage(CreateArgs {
                tool: None,
                ..flags()
            })
            .starts_with("create needs --tool NAME")
        );
        assert!(
            usage(CreateArgs {
                request_id: "x".into(),
                ..flags()
            })
            .contains("a number such as 7")
        );
        assert!(
            usage(CreateArgs {
                ttl: Some("unlimited".into()),
                ..flags()
            })
            .contains("never expires")
        );
        assert!(
            usage(CreateArgs {
                ttl: Some("soon".into()),
                ..flags()
            })
            .contains("such as 30m")
        );
        assert!(
            usage(CreateArgs {
                tool: Some("ech o".into()),
                ..flags()
            })
            .starts_with("tool \"ech o\"")
        );
    }
}
