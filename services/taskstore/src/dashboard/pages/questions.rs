//! Needs input: every open question of the tenant, oldest first.

use maud::{Markup, html};

use super::super::render::{segment, time};
use crate::domain::WaitingQuestion;

pub fn body(base: &str, waiting: &[WaitingQuestion]) -> Markup {
    html! {
        h1 { "Needs input" }
        @if waiting.is_empty() { p { "No task waits for an answer." } }
        @else {
            table #questions-list {
                caption.visually-hidden { "Open questions, oldest first" }
                thead { tr {
                    th scope="col" { "Asked" } th scope="col" { "Task" } th scope="col" { "Tool" }
                    th scope="col" { "Kind" } th scope="col" { "Question" }
                } }
                tbody {
                    @for each in waiting {
                        tr data-task-id=(each.task.task_id.as_str()) {
                            td { (time(each.question.asked_at)) }
                            td { a href={ (base) "/tasks/" (segment(each.task.task_id.as_str())) "#questions" } { code { (each.task.task_id.as_str()) } } }
                            td { (each.task.tool.as_ref().map_or("—", |tool| tool.as_str())) }
                            td { (each.question.request.method().as_str()) }
                            td { (each.question.request.summary()) }
                        }
                    }
                }
            }
        }
    }
}
