//! The tools the fleet serves now, one tool with its schema and the workers
//! serving it, and a form generated from its input schema that runs it as a
//! task. `field` draws one schema property as a form control; the answer
//! forms of elicitations use it too.

use maud::{Markup, html};
use serde_json::Value;

use super::super::render::{query_value, segment};
use super::super::viewer::Viewer;
use super::result::pretty;
use crate::domain::{
    ACTIVITY_SAMPLE, Activity, Operation, ServedTool, ToolActivity, ToolDispatch, WorkerInfo,
};

/// `dispatch`: what waits per tool, for viewers who see every tenant.
pub fn list(
    base: &str,
    tools: &[ServedTool],
    activity: &Activity,
    dispatch: Option<&[ToolDispatch]>,
) -> Markup {
    html! {
        h1 { "Tools" }
        @if tools.is_empty() { p { "No worker serves a tool now." } }
        @else {
            table #tools {
                caption.visually-hidden { "Tools served now, and their last hour" }
                thead {
                    tr {
                        th scope="col" rowspan="2" { "Tool" } th scope="col" rowspan="2" { "Description" }
                        th scope="col" rowspan="2" { "Task support" } th scope="col" rowspan="2" { "Workers" }
                        th scope="col" rowspan="2" { "Busy / slots" }
                        @if dispatch.is_some() {
                            th scope="col" rowspan="2" { abbr title="jobs due and waiting for room, a key's slot, its rate or its pause" { "Waiting" } }
                        }
                        th scope="colgroup" colspan="5" { "Last hour" }
                    }
                    tr {
                        th scope="col" { "Completed" } th scope="col" { "Failed" } th scope="col" { "Failure rate" }
                        th scope="col" { abbr title="median time from creation to end" { "p50" } }
                        th scope="col" { abbr title="95th percentile of the time from creation to end" { "p95" } }
                    }
                }
                tbody {
                    @for tool in tools {
                        @let last_hour = activity.of(&tool.name);
                        tr data-tool=(tool.name.as_str()) {
                            td { a href={ (base) "/tools/" (segment(tool.name.as_str())) } { code { (tool.name.as_str()) } } }
                            td { (tool.description.description.as_deref().or(tool.description.title.as_deref()).unwrap_or("")) }
                            td { (tool.description.task_support.as_str()) }
                            td {
                                (tool.workers)
                                @if tool.consuming < tool.workers {
                                    " " span.warn { "(" (tool.consuming) " consuming its queue)" }
                                }
                                @if tool.descriptions > 1 {
                                    " " a.warn href={ (base) "/workers" } { "described " (tool.descriptions) " ways" }
                                }
                            }
                            td { (tool.busy) " / " (tool.slots) }
                            @if let Some(dispatch) = dispatch {
                                @let held = dispatch.iter().find(|d| d.tool == tool.name.as_str());
                                td.num {
                                    (held.map_or(0, |d| d.waiting))
                                    @if held.is_some_and(|d| d.keys.iter().any(|k| k.paused_until.is_some())) {
                                        " " span.warn { "paused" }
                                    }
                                }
                            }
                            (activity_cells(last_hour))
                        }
                    }
                }
            }
            (sample_note(activity))
        }
    }
}

/// A tool's last hour as table cells: dashes when none of its tasks ended.
fn activity_cells(activity: Option<&ToolActivity>) -> Markup {
    html! {
        @match activity {
            Some(a) => {
                td.num { (a.completed) }
                td.num { (a.failed) }
                td.num { (a.failure_rate().map_or_else(|| "–".to_owned(), |rate| format!("{:.1} %", rate * 100.0))) }
                td.num { (millis(a.p50_ms)) }
                td.num { (millis(a.p95_ms)) }
            },
            None => { @for _ in 0..5 { td.num { "–" } } },
        }
    }
}

fn sample_note(activity: &Activity) -> Markup {
    html! {
        p.note {
            "Last hour: tasks that ended in the last 60 minutes; times from creation to end (queueing included)."
            @if activity.sampled { " Only the " (ACTIVITY_SAMPLE) " most recent are counted." }
        }
    }
}

/// A duration in milliseconds, written for people.
fn millis(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1_000.0),
        _ => format!("{:.1} min", ms as f64 / 60_000.0),
    }
}

pub fn one(
    base: &str,
    viewer: &Viewer,
    tool: &ServedTool,
    workers: &[&WorkerInfo],
    activity: &Activity,
) -> Markup {
    let description = &tool.description;
    let schema: Value = serde_json::from_str(description.input_schema.as_str()).unwrap_or_default();
    let properties = schema.get("properties").and_then(Value::as_object);
    let simple = properties.is_some_and(|p| p.values().all(is_simple));
    html! {
        h1 { "Tool " code { (tool.name.as_str()) } }
        @if let Some(title) = &description.title { p.lead { (title) } }
        @if let Some(text) = &description.description { p { (text) } }
        p { "Task support: " (description.task_support.as_str()) ". Served by " (tool.workers) " workers, " (tool.busy) " of " (tool.slots) " slots busy." }
        section aria-labelledby="hour-title" {
            h2 #hour-title { "Last hour" }
            table #activity {
                thead { tr {
                    th scope="col" { "Completed" } th scope="col" { "Failed" } th scope="col" { "Failure rate" }
                    th scope="col" { "p50" } th scope="col" { "p95" }
                } }
                tbody { tr { (activity_cells(activity.of(&tool.name))) } }
            }
            (sample_note(activity))
        }
        p { a href={ (base) "/tasks?tool=" (query_value(tool.name.as_str())) } { "Its tasks" } }
        @if viewer.may(Operation::CreateTask) {
            section aria-labelledby="run-title" {
                h2 #run-title { "Run it" }
                form #run method="post" action={ (base) "/tools/" (segment(tool.name.as_str())) "/run" } {
                    @match (simple, properties) {
                        (true, Some(properties)) => {
                            @for (name, property) in properties {
                                (field(&format!("arg.{name}"), name, property))
                            }
                        },
                        _ => {
                            label.field {
                                span { "Arguments (JSON object)" }
                                textarea name="arguments" rows="6" { "{}" }
                            }
                        },
                    }
                    button type="submit" { "Run as a task" }
                }
            }
        }
        section aria-labelledby="schema-title" {
            h2 #schema-title { "Input schema" }
            pre.json { (pretty(&schema)) }
        }
        section aria-labelledby="workers-title" {
            h2 #workers-title { "Workers serving it" }
            ul { @for worker in workers { li { code { (worker.heartbeat.worker_id.as_str()) } } } }
        }
    }
}

/// Whether a schema property becomes one plain control.
fn is_simple(property: &Value) -> bool {
    matches!(
        property.get("type").and_then(Value::as_str),
        Some("string" | "number" | "integer" | "boolean")
    )
}

/// One schema property as a labelled control named `name`.
pub fn field(name: &str, label: &str, schema: &Value) -> Markup {
    let kind = schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string");
    let title = schema.get("title").and_then(Value::as_str).unwrap_or(label);
    let help = schema.get("description").and_then(Value::as_str);
    let choices = schema.get("enum").and_then(Value::as_array);
    // A checkbox sits right before its words, on one line.
    if kind == "boolean" && choices.is_none() {
        return html! {
            label.field.boolean {
                input type="checkbox" name=(name) value="true";
                span { (title) }
                @if let Some(help) = help { small { (help) } }
            }
        };
    }
    html! {
        label.field {
            span { (title) }
            @match (kind, choices) {
                (_, Some(choices)) => {
                    select name=(name) {
                        @for choice in choices {
                            @let text = choice.as_str().map_or_else(|| choice.to_string(), str::to_owned);
                            option value=(text) { (text) }
                        }
                    }
                },
                ("boolean", None) => { input type="checkbox" name=(name) value="true"; },
                ("number", None) => { input type="number" step="any" name=(name); },
                ("integer", None) => { input type="number" step="1" name=(name); },
                _ => { input type="text" name=(name); },
            }
            @if let Some(help) = help { small { (help) } }
        }
    }
}

/// The arguments a run form (or an elicitation's answer form) filled in:
/// each `prefix.<property>` typed by its schema; an empty field left out.
pub fn filled(
    schema_properties: Option<&serde_json::Map<String, Value>>,
    prefix: &str,
    pairs: &[(String, String)],
) -> Result<serde_json::Map<String, Value>, String> {
    let mut out = serde_json::Map::new();
    let Some(properties) = schema_properties else {
        return Ok(out);
    };
    for (name, schema) in properties {
        let key = format!("{prefix}.{name}");
        let raw = pairs
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str());
        let kind = schema
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("string");
        let value = match (kind, raw) {
            ("boolean", raw) => Value::Bool(raw == Some("true")),
            (_, None) => continue,
            (_, Some(raw)) if raw.trim().is_empty() => continue,
            ("integer", Some(raw)) => Value::from(
                raw.trim()
                    .parse::<i64>()
                    .map_err(|_| format!("{name}: must be a whole number"))?,
            ),
            ("number", Some(raw)) => raw
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("{name}: must be a number"))?,
            (_, Some(raw)) => Value::String(raw.to_owned()),
        };
        out.insert(name.clone(), value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_typed_by_the_schema() {
        let schema: Value = serde_json::json!({"properties": {
            "ms": {"type": "integer"}, "loud": {"type": "boolean"},
            "name": {"type": "string"}, "ratio": {"type": "number"}}});
        let pairs = vec![
            ("arg.ms".to_owned(), "250".to_owned()),
            ("arg.name".to_owned(), "<b>".to_owned()),
            ("arg.ratio".to_owned(), "".to_owned()),
        ];
        let arguments = filled(schema["properties"].as_object(), "arg", &pairs).expect("valid");
        assert_eq!(
            Value::Object(arguments),
            serde_json::json!({"ms": 250, "loud": false, "name": "<b>"})
        );
        let bad = vec![("arg.ms".to_owned(), "soon".to_owned())];
        assert!(filled(schema["properties"].as_object(), "arg", &bad).is_err());
    }
}
