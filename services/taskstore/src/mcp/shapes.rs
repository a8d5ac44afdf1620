//! Tasks and tools as each revision writes them.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

use crate::domain::{Revision, Task, ToolDescription};

/// `_meta` key tying a result to its task (2025-11-25 `tasks/result`).
pub(super) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A task's common fields; `status` is the revision's name for its state.
pub(super) fn task(revision: Revision, task: &Task, status: &str) -> Map<String, Value> {
    let ttl = task.ttl.map_or(Value::Null, |ttl| json!(ttl.as_millis()));
    let poll = json!(millis(task.poll_interval));
    let mut object = Map::new();
    object.insert("taskId".into(), json!(task.task_id.as_str()));
    object.insert("status".into(), json!(status));
    if let Some(message) = &task.status_message {
        object.insert("statusMessage".into(), json!(message));
    }
    object.insert("createdAt".into(), json!(timestamp(task.created_at)));
    object.insert(
        "lastUpdatedAt".into(),
        json!(timestamp(task.last_updated_at)),
    );
    match revision {
        Revision::V2025_11_25 => {
            object.insert("ttl".into(), ttl);
            object.insert("pollInterval".into(), poll);
        }
        Revision::V2026_07_28 => {
            object.insert("ttlMs".into(), ttl);
            object.insert("pollIntervalMs".into(), poll);
        }
    }
    object
}

/// 2025-11-25: the task as stored (its status needs no mapping).
pub(super) fn core_task(task: &Task) -> Value {
    Value::Object(self::task(
        Revision::V2025_11_25,
        task,
        task.status.as_str(),
    ))
}

/// A tool in `tools/list`. `execution.taskSupport` is 2025-11-25's; in
/// 2026-07-28 the server decides per call, so it is left out.
pub(super) fn tool(revision: Revision, tool: &ToolDescription) -> Value {
    let schema: Value = serde_json::from_str(tool.input_schema.as_str())
        .unwrap_or_else(|_| json!({ "type": "object" }));
    let mut object = Map::new();
    object.insert("name".into(), json!(tool.name.as_str()));
    if let Some(title) = &tool.title {
        object.insert("title".into(), json!(title));
    }
    if let Some(description) = &tool.description {
        object.insert("description".into(), json!(description));
    }
    object.insert("inputSchema".into(), schema);
    if revision == Revision::V2025_11_25 {
        object.insert(
            "execution".into(),
            json!({ "taskSupport": tool.task_support.as_str() }),
        );
    }
    Value::Object(object)
}

/// A stored `CallToolResult`, with `_meta` naming its task (2025-11-25).
pub(super) fn result_of_task(result: Value, task: &Task) -> Value {
    let mut result = result;
    if let Some(object) = result.as_object_mut() {
        let meta = object
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(
                RELATED_TASK.into(),
                json!({ "taskId": task.task_id.as_str() }),
            );
        }
    }
    result
}
