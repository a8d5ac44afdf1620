//! How the client commands print: aligned text for people, JSON with MCP's
//! field names for scripts.

use std::io::Write;

use serde_json::json;

use crate::domain::{Task, TaskPage, TaskResult};

#[derive(Debug, Clone, Copy)]
pub(super) struct Output {
    json: bool,
}

impl Output {
    pub(super) fn new(json: bool) -> Self {
        Self { json }
    }

    pub(super) fn task(&self, task: &Task) -> std::io::Result<()> {
        if self.json {
            return print_json(&json!(task));
        }
        let mut out = std::io::stdout().lock();
        for (name, value) in task_fields(task) {
            writeln!(out, "{name:<16}{value}")?;
        }
        Ok(())
    }

    /// One line per change (one JSON document per line with --json).
    pub(super) fn change(&self, task: &Task) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        if self.json {
            serde_json::to_writer(&mut out, task)?;
            return writeln!(out);
        }
        writeln!(
            out,
            "{}  {:<15} {}",
            task.last_updated_at
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            task.status,
            task.status_message.as_deref().unwrap_or("")
        )
    }

    pub(super) fn page(&self, page: &TaskPage) -> std::io::Result<()> {
        if self.json {
            return print_json(&json!({ "tasks": page.tasks, "nextCursor": page.next_cursor }));
        }
        let mut out = std::io::stdout().lock();
        for task in &page.tasks {
            writeln!(
                out,
                "{:<34} {:<15} {}  {}",
                task.task_id,
                task.status,
                task.created_at
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                task.status_message.as_deref().unwrap_or("")
            )?;
        }
        if let Some(cursor) = &page.next_cursor {
            writeln!(out, "next cursor: {cursor}")?;
        }
        Ok(())
    }

    pub(super) fn result(&self, result: &TaskResult) -> std::io::Result<()> {
        // The stored text is valid JSON (checked when it was stored).
        let value: serde_json::Value =
            serde_json::from_str(result.result.as_str()).unwrap_or(serde_json::Value::Null);
        if self.json {
            return print_json(&json!({ "task": result.task, "result": value }));
        }
        let mut out = std::io::stdout().lock();
        writeln!(out, "{:<16}{}", "task_id", result.task.task_id)?;
        writeln!(out, "{:<16}{}", "status", result.task.status)?;
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        )?;
        Ok(())
    }

    pub(super) fn deleted(&self, deleted: u64) -> std::io::Result<()> {
        if self.json {
            return print_json(&json!({ "deleted": deleted }));
        }
        writeln!(std::io::stdout().lock(), "deleted {deleted} expired tasks")
    }
}

fn task_fields(task: &Task) -> Vec<(&'static str, String)> {
    let time = |at: &chrono::DateTime<chrono::Utc>| {
        at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
    };
    let mut fields = vec![
        ("task_id", task.task_id.to_string()),
        ("status", task.status.to_string()),
    ];
    if let Some(message) = &task.status_message {
        fields.push(("status_message", message.clone()));
    }
    if let Some(session) = &task.session_id {
        fields.push(("session_id", session.to_string()));
    }
    fields.push(("created_at", time(&task.created_at)));
    fields.push(("last_updated_at", time(&task.last_updated_at)));
    fields.push((
        "ttl",
        task.ttl
            .map(|ttl| humantime::format_duration(ttl.as_duration()).to_string())
            .unwrap_or_else(|| "unlimited".to_owned()),
    ));
    fields.push((
        "poll_interval",
        humantime::format_duration(task.poll_interval).to_string(),
    ));
    fields
}

fn print_json(value: &serde_json::Value) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)
}
