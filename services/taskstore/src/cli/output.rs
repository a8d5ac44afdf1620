//! How the client commands print: aligned text for people; for scripts
//! (`--json`), one compact JSON document per line, with MCP's field names
//! (the same style everywhere, so `watch --json` is a stream of the objects
//! `get --json` prints).

use std::io::Write;

use serde::Serialize;
use serde_json::json;

use crate::domain::{Task, TaskId, TaskPage, TaskResult};
use crate::grpc::pb;

#[derive(Debug, Clone, Copy)]
pub(super) struct Output {
    json: bool,
}

/// A timestamp as the text output shows it.
fn time(at: &chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Text for a table cell: one line.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r', '\t'], " ")
}

impl Output {
    pub(super) fn new(json: bool) -> Self {
        Self { json }
    }

    pub(super) fn is_json(&self) -> bool {
        self.json
    }

    pub(super) fn task(&self, task: &Task) -> std::io::Result<()> {
        if self.json {
            return print_json(task);
        }
        let mut out = std::io::stdout().lock();
        for (name, value) in task_fields(task) {
            writeln!(out, "{name:<16}{value}")?;
        }
        Ok(())
    }

    /// A task's attempt and lease holder, after its fields.
    pub(super) fn execution(
        &self,
        task: &Task,
        execution: &pb::TaskExecutionState,
    ) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        for (name, value) in execution_fields(task, execution) {
            writeln!(out, "{name:<16}{value}")?;
        }
        Ok(())
    }

    /// One line per change.
    pub(super) fn change(&self, task: &Task) -> std::io::Result<()> {
        if self.json {
            return print_json(task);
        }
        writeln!(
            std::io::stdout().lock(),
            "{}  {:<14}  {}",
            time(&task.last_updated_at),
            task.status,
            one_line(task.status_message.as_deref().unwrap_or(""))
        )
    }

    /// A page of tasks; `more` is the command that prints the next page.
    pub(super) fn page(&self, page: &TaskPage, more: Option<&str>) -> std::io::Result<()> {
        if self.json {
            #[derive(Serialize)]
            #[serde(rename_all = "camelCase")]
            struct Listing<'a> {
                tasks: &'a [Task],
                #[serde(skip_serializing_if = "Option::is_none")]
                next_cursor: Option<&'a str>,
            }
            return print_json(&Listing {
                tasks: &page.tasks,
                next_cursor: page.next_cursor.as_deref(),
            });
        }
        let rows: Vec<[String; 5]> = page
            .tasks
            .iter()
            .map(|task| {
                [
                    task.task_id.to_string(),
                    task.status.to_string(),
                    task.tool
                        .as_ref()
                        .map_or("-".to_owned(), ToString::to_string),
                    time(&task.created_at),
                    one_line(task.status_message.as_deref().unwrap_or("")),
                ]
            })
            .collect();
        let header = ["TASK ID", "STATUS", "TOOL", "CREATED", "MESSAGE"].map(str::to_owned);
        let mut out = std::io::stdout().lock();
        write_table(&mut out, &header, &rows)?;
        if let Some(more) = more {
            writeln!(out, "more tasks: {more}")?;
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
        if let Some(message) = &result.task.status_message {
            writeln!(out, "{:<16}{}", "status_message", message)?;
        }
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        )
    }

    /// A finished task that has no result (it was cancelled).
    pub(super) fn without_result(&self, task: &Task) -> std::io::Result<()> {
        if self.json {
            return print_json(&json!({ "task": task }));
        }
        self.task(task)
    }

    pub(super) fn deleted(&self, deleted: u64) -> std::io::Result<()> {
        if self.json {
            return print_json(&json!({ "deleted": deleted }));
        }
        writeln!(std::io::stdout().lock(), "deleted {deleted} expired tasks")
    }

    pub(super) fn task_deleted(&self, task_id: &TaskId) -> std::io::Result<()> {
        if self.json {
            return print_json(&json!({ "taskId": task_id.as_str(), "deleted": true }));
        }
        writeln!(std::io::stdout().lock(), "deleted task {task_id}")
    }
}

/// Columns as wide as their widest cell; the last one is not padded.
pub(super) fn write_table<const N: usize>(
    out: &mut impl Write,
    header: &[String; N],
    rows: &[[String; N]],
) -> std::io::Result<()> {
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(header).chain(rows) {
        let mut line = String::new();
        for (index, (cell, width)) in row.iter().zip(widths).enumerate() {
            if index + 1 == N {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  "));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
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
    if let Some(tool) = &task.tool {
        fields.push(("tool", tool.to_string()));
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

/// One compact JSON document and a newline.
pub(super) fn print_json(value: &impl Serialize) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, value)?;
    writeln!(out)
}

/// Whether a task's execution says anything: it is run by workers (or was
/// held by an SDK server's lease).
pub(super) fn worth_showing(execution: &pb::TaskExecutionState) -> bool {
    execution.max_attempts.is_some() || execution.attempt > 0 || execution.lease_holder.is_some()
}

/// When the lease of a task still running ends.
fn lease_expiry(task: &Task, execution: &pb::TaskExecutionState) -> Option<String> {
    if task.status.is_terminal() {
        return None;
    }
    let at = execution.lease_expires_at.as_ref()?;
    let at = chrono::DateTime::from_timestamp(at.seconds, u32::try_from(at.nanos).ok()?)?;
    Some(at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

fn execution_fields(
    task: &Task,
    execution: &pb::TaskExecutionState,
) -> Vec<(&'static str, String)> {
    let attempt = match (execution.attempt, execution.max_attempts) {
        (0, _) => "not run yet".to_owned(),
        (n, Some(max)) => format!("{n} of {max}"),
        (n, None) => n.to_string(),
    };
    let mut fields = vec![("attempt", attempt)];
    // As the dashboard says it: the holder while the task runs, the last
    // one once it ended.
    match (&execution.lease_holder, lease_expiry(task, execution)) {
        (Some(holder), Some(until)) => {
            fields.push(("worker", format!("{holder}, lease until {until}")))
        }
        (Some(holder), None) => fields.push(("worker", format!("{holder} (last)"))),
        (None, _) => {}
    }
    fields
}

/// The `execution` member of `get --json`.
pub(super) fn execution_json(task: &Task, execution: &pb::TaskExecutionState) -> serde_json::Value {
    json!({
        "attempt": execution.attempt,
        "maxAttempts": execution.max_attempts,
        "worker": execution.lease_holder,
        "leaseExpiresAt": lease_expiry(task, execution),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_columns_line_up_whatever_the_widths() {
        let header = ["ID", "STATUS", "NOTE"].map(str::to_owned);
        let rows = [
            ["a-very-long-id", "working", "x"].map(str::to_owned),
            ["b", "input_required", ""].map(str::to_owned),
        ];
        let mut out = Vec::new();
        write_table(&mut out, &header, &rows).expect("write");
        let text = String::from_utf8(out).expect("utf-8");
        assert_eq!(
            text,
            "ID              STATUS          NOTE\n\
             a-very-long-id  working         x\n\
             b               input_required\n"
        );
    }
}
