//! The tasks page: filters kept in the URL, newest first, keyset pages, a
//! bulk form; and one row, which the live stream sends for new tasks too.

use maud::{Markup, html};

use super::super::params::TaskQuery;
use super::super::render::{segment, status, time};
use super::super::viewer::Viewer;
use crate::domain::{Operation, SearchResults, Task, TaskStatus};

/// The page's body.
pub fn body(
    base: &str,
    viewer: &Viewer,
    query: &TaskQuery,
    results: &SearchResults,
    notice: Option<&str>,
) -> Markup {
    let may_cancel = viewer.may(Operation::CancelTask);
    let filters = query.filters_query();
    let events = format!("{base}/events?{filters}");
    html! {
        h1 { "Tasks" }
        @if let Some(notice) = notice { p.notice role="status" { (notice) } }
        (filter_form(base, query))
        @if may_cancel {
            form #bulk method="post" action={ (base) "/tasks/cancel" } {
                button type="submit" { "Cancel selected" }
                " "
                a href={ (base) "/tasks/cancel-matching?" (filters) } { "Cancel all matching" }
            }
        }
        table #tasks data-events=(events) data-first-page=[query.page.after.is_none().then_some("true")] {
            caption.visually-hidden { "Tasks, newest first" }
            thead {
                tr {
                    @if may_cancel { th scope="col" { span.visually-hidden { "Select" } } }
                    th scope="col" { "Status" }
                    th scope="col" { "Task" }
                    th scope="col" { "Tool" }
                    th scope="col" { "Created" }
                    th scope="col" { "Message" }
                }
            }
            tbody {
                @for task in &results.tasks { (row(base, task, may_cancel)) }
            }
        }
        @if results.tasks.is_empty() {
            p.empty { "No task matches." }
        }
        @if results.truncated {
            p.notice { "This page stopped after examining many tasks that do not match; older ones may follow." }
        }
        nav.paging aria-label="Pages" {
            @if query.page.after.is_some() {
                a href={ (base) "/tasks?" (filters) } { "Newest" }
                " "
            }
            @if let Some(next) = &results.next {
                a rel="next" href={ (base) "/tasks?" (filters) (if filters.is_empty() { "" } else { "&" }) "after=" (next.encode()) } { "Older" }
            }
        }
    }
}

/// One task's row.
pub fn row(base: &str, task: &Task, selectable: bool) -> Markup {
    let id = task.task_id.as_str();
    html! {
        tr id={ "task-" (id) } data-task-id=(id) data-status=(task.status.as_str()) {
            @if selectable {
                td {
                    @if !task.status.is_terminal() {
                        input type="checkbox" name="task" value=(id) form="bulk" aria-label={ "Select task " (id) };
                    }
                }
            }
            td.status { (status(task.status)) }
            td.id { a href={ (base) "/tasks/" (segment(id)) } { code { (id) } } }
            td.tool { (task.tool.as_ref().map_or("—", |tool| tool.as_str())) }
            td.created { (time(task.created_at)) }
            td.message { (task.status_message.as_deref().unwrap_or("")) }
        }
    }
}

fn filter_form(base: &str, query: &TaskQuery) -> Markup {
    html! {
        form #filters method="get" action={ (base) "/tasks" } {
            fieldset {
                legend { "Status" }
                @for each in TaskStatus::ALL {
                    label.check {
                        input type="checkbox" name="status" value=(each.as_str()) checked[query.has_status(each)];
                        " " (each.as_str())
                    }
                }
            }
            @for (name, label, kind) in [
                ("tool", "Tool", "text"),
                ("session", "Session", "text"),
                ("worker", "Worker", "text"),
                ("from", "Created from (UTC)", "datetime-local"),
                ("until", "Created before (UTC)", "datetime-local"),
                ("id", "Id starts with", "text"),
                ("message", "Message contains", "search"),
            ] {
                label.field {
                    span { (label) }
                    input type=(kind) name=(name) value=(query.given(name));
                }
            }
            button type="submit" { "Filter" }
            " "
            a href={ (base) "/tasks" } { "Clear" }
        }
    }
}

/// The confirmation of "cancel all matching".
pub fn confirm_cancel_matching(
    base: &str,
    query: &TaskQuery,
    count: usize,
    capped: bool,
) -> Markup {
    let filters = query.filters_query();
    html! {
        h1 { "Cancel all matching tasks" }
        @if count == 0 {
            p { "No unfinished task matches these filters." }
        } @else {
            p {
                (count) @if capped { " or more" } " unfinished tasks match these filters"
                @if filters.is_empty() { " (no filter: every unfinished task of the tenant)" }
                "."
            }
            form method="post" action={ (base) "/tasks/cancel-matching?" (filters) } {
                input type="hidden" name="expected" value=(count);
                button type="submit" { "Cancel " (count) " tasks" }
            }
        }
        p { a href={ (base) "/tasks?" (filters) } { "Back to the tasks" } }
    }
}
