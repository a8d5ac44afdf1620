//! The workers that reported lately: their tools, slots and busy slots.

use maud::{Markup, html};

use super::super::render::{query_value, segment, time};
use crate::domain::WorkerInfo;

pub fn body(base: &str, workers: &[WorkerInfo]) -> Markup {
    html! {
        h1 { "Workers" }
        @if workers.is_empty() { p { "No worker reported in the last 30 seconds." } }
        @else {
            table #workers {
                caption.visually-hidden { "Workers that reported lately" }
                thead { tr {
                    th scope="col" { "Worker" } th scope="col" { "Tools" } th scope="col" { "Busy / slots" }
                    th scope="col" { "First seen" } th scope="col" { "Last seen" }
                } }
                tbody {
                    @for worker in workers {
                        @let id = worker.heartbeat.worker_id.as_str();
                        tr {
                            td { a href={ (base) "/tasks?worker=" (query_value(id)) } { code { (id) } } }
                            td { @for (i, tool) in worker.heartbeat.tools.iter().enumerate() {
                                @if i > 0 { ", " }
                                a href={ (base) "/tools/" (segment(tool.as_str())) } { (tool.as_str()) }
                            } }
                            td { (worker.heartbeat.busy) " / " (worker.heartbeat.slots) }
                            td { (time(worker.first_seen_at)) }
                            td { (time(worker.last_seen_at)) }
                        }
                    }
                }
            }
        }
    }
}
