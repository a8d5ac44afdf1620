//! The tenant's MCP sessions: each one's tasks, how many are unfinished,
//! when it last created one; a link to its tasks.

use maud::{Markup, html};

use super::super::render::{query_value, time};
use crate::domain::SessionSummary;

pub fn body(base: &str, sessions: &[SessionSummary]) -> Markup {
    html! {
        h1 { "Sessions" }
        @if sessions.is_empty() { p { "No MCP session has unexpired tasks." } }
        @else {
            table #sessions {
                caption.visually-hidden { "MCP sessions, the most recently active first" }
                thead { tr {
                    th scope="col" { "Session" } th scope="col" { "Tasks" }
                    th scope="col" { "Unfinished" } th scope="col" { "Last task created" }
                } }
                tbody {
                    @for each in sessions {
                        tr {
                            td { a href={ (base) "/tasks?session=" (query_value(each.session.as_str())) } { code { (each.session.as_str()) } } }
                            td { (each.tasks) }
                            td { (each.unfinished) }
                            td { (time(each.last_created_at)) }
                        }
                    }
                }
            }
        }
    }
}
