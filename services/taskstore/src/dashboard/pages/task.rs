//! One task: its state, the MCP request that created it, its result, its
//! questions with forms to answer them, its attempt and the worker holding
//! it, its attempts as a timeline (`attempts.rs`), and the actions the
//! viewer may take.

use maud::{Markup, html};
use serde_json::Value;

use super::super::render::{query_value, segment, status, time};
use super::super::viewer::Viewer;
use super::attempts::timeline;
use super::result::{call_tool_result, pretty};
use crate::domain::{InputMethod, Operation, Question, TaskDetails};

pub fn body(
    base: &str,
    viewer: &Viewer,
    details: &TaskDetails,
    trace_link: impl Fn(&str) -> Option<String>,
) -> Markup {
    let task = &details.task;
    let id = task.task_id.as_str();
    let path = format!("{base}/tasks/{}", segment(id));
    let open = !task.status.is_terminal();
    html! {
        h1 { "Task " code { (id) } }
        dl #task data-task-id=(id) data-events={ (base) "/events?id=" (query_value(id)) } {
            dt { "Status" } dd data-field="status" { (status(task.status)) }
            dt { "Message" } dd data-field="message" { (task.status_message.as_deref().unwrap_or("—")) }
            dt { "Tool" } dd data-field="tool" { (task.tool.as_ref().map_or("—", |tool| tool.as_str())) }
            dt { "Session" } dd data-field="session" { (task.session_id.as_ref().map_or("—", |s| s.as_str())) }
            dt { "Created" } dd data-field="created" { (time(task.created_at)) }
            dt { "Updated" } dd data-field="updated" { (time(task.last_updated_at)) }
            dt { "Kept for" } dd data-field="ttl" {
                @match task.ttl { Some(ttl) => { (humantime::format_duration(std::time::Duration::from_millis(ttl.as_millis()))) " after it finishes" }, None => "forever" }
            }
            dt { "Attempt" } dd data-field="attempt" {
                @if details.attempt == 0 { "not run yet" } @else {
                    (details.attempt) @if let Some(max) = details.max_attempts { " of " (max) }
                }
            }
            dt { "Worker" } dd data-field="worker" {
                @match (&details.lease_owner, details.lease_expires_at) {
                    (Some(owner), Some(until)) if open => { (owner) ", lease until " (time(until)) },
                    (Some(owner), _) => { (owner) " (last)" },
                    _ => "—",
                }
            }
            @if let Some(trace) = &details.trace {
                @let id = trace_id(trace.as_str());
                dt { "Trace" } dd data-field="trace" {
                    @match trace_link(id) {
                        Some(link) => { a href=(link) rel="noreferrer noopener" { code { (id) } } },
                        None => { code { (id) } },
                    }
                }
            }
        }
        (actions(&path, viewer, details))
        section #arguments-section aria-labelledby="arguments-title" {
            h2 #arguments-title { "Request" }
            pre #arguments.json { (arguments(&details.request_json)) }
        }
        section #questions aria-labelledby="questions-title" {
            h2 #questions-title { "Questions" }
            @if details.questions.is_empty() { p { "The tool asked nothing." } }
            @for question in &details.questions {
                (question_block(&path, viewer, question, open))
            }
        }
        section #result aria-labelledby="result-title" {
            h2 #result-title { "Result" }
            @match &details.result {
                Some(result) => { (call_tool_result(result.result.as_str())) },
                None => { p { "No result yet." } },
            }
        }
        (timeline(details))
    }
}

fn actions(path: &str, viewer: &Viewer, details: &TaskDetails) -> Markup {
    let open = !details.task.status.is_terminal();
    html! {
        div.actions {
            @if open && viewer.may(Operation::CancelTask) {
                form method="post" action={ (path) "/cancel" } { button type="submit" { "Cancel task" } }
            }
            @if viewer.may(Operation::CreateTask) && details.task.tool.is_some() {
                form method="post" action={ (path) "/rerun" } { button type="submit" { "Run again" } }
            }
            @if viewer.may(Operation::DeleteTask) {
                form method="post" action={ (path) "/delete" } { button.danger type="submit" { "Delete task" } }
            }
        }
    }
}

fn question_block(path: &str, viewer: &Viewer, question: &Question, open: bool) -> Markup {
    let key = question.key.as_str();
    let request: Value =
        serde_json::from_str(question.request.as_json().as_str()).unwrap_or_default();
    let params = request.get("params").cloned().unwrap_or_default();
    html! {
        article.question data-key=(key) {
            h3 { (question.request.method().as_str()) ": " (question.request.summary()) }
            p { "Asked " (time(question.asked_at)) " · key " code { (key) } }
            @match &question.answer {
                Some(answer) => {
                    p { "Answered " (time(answer.answered_at)) }
                    pre.json { (reformat(answer.result.as_str())) }
                },
                None if open && viewer.may(Operation::AnswerQuestions) => {
                    (answer_form(path, key, question.request.method(), &params))
                },
                None => { p { "Not answered." } },
            }
        }
    }
}

/// A form for an open question: an elicitation's fields from its
/// requested schema; for other methods, the result as JSON.
fn answer_form(path: &str, key: &str, method: InputMethod, params: &Value) -> Markup {
    let properties = params
        .pointer("/requestedSchema/properties")
        .and_then(Value::as_object);
    html! {
        form.answer method="post" action={ (path) "/answer" } {
            input type="hidden" name="key" value=(key);
            @match (method, properties) {
                (InputMethod::Elicitation, Some(properties)) => {
                    @for (name, schema) in properties {
                        (super::tools::field(&format!("field.{name}"), name, schema))
                    }
                    button type="submit" name="action" value="accept" { "Answer" }
                    " "
                    button type="submit" name="action" value="decline" { "Decline" }
                },
                _ => {
                    label.field {
                        span { "The answer (the client's result, JSON)" }
                        textarea name="result" rows="4" required {}
                    }
                    button type="submit" name="action" value="json" { "Answer" }
                },
            }
        }
    }
}

/// The `arguments` of a `tools/call` request (else the whole request).
fn arguments(request_json: &str) -> String {
    match serde_json::from_str::<Value>(request_json) {
        Ok(request) => pretty(request.pointer("/params/arguments").unwrap_or(&request)),
        Err(_) => request_json.to_owned(),
    }
}

fn reformat(json: &str) -> String {
    serde_json::from_str::<Value>(json).map_or_else(|_| json.to_owned(), |value| pretty(&value))
}

/// The trace id of a `traceparent` (version-traceid-spanid-flags).
fn trace_id(traceparent: &str) -> &str {
    traceparent.split('-').nth(1).unwrap_or(traceparent)
}
