//! The workers that reported lately: their tools, whom they serve, whether
//! they consume their queues, slots and busy slots, and how each describes
//! a tool that its workers describe differently.

use maud::{Markup, html};

use super::super::render::{query_value, segment, time};
use crate::domain::{WorkerInfo, differing_descriptions};

pub fn body(base: &str, workers: &[WorkerInfo]) -> Markup {
    let differing = differing_descriptions(workers);
    html! {
        h1 { "Workers" }
        @if workers.is_empty() { p { "No worker reported in the last 30 seconds." } }
        @else {
            table #workers {
                caption.visually-hidden { "Workers that reported lately" }
                thead { tr {
                    th scope="col" { "Worker" } th scope="col" { "Tools" } th scope="col" { "Serves" }
                    th scope="col" { "Consuming" } th scope="col" { "Busy / slots" }
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
                            td { @match &worker.heartbeat.reach {
                                crate::domain::Reach::AllTenants => "every tenant",
                                crate::domain::Reach::Tenant(tenant) => (tenant.as_str()),
                            } }
                            td { @if worker.heartbeat.consuming { "yes" } @else { span.warn { "no: cannot reach the job queue" } } }
                            td { (worker.heartbeat.busy) " / " (worker.heartbeat.slots) }
                            td { (time(worker.first_seen_at)) }
                            td { (time(worker.last_seen_at)) }
                        }
                    }
                }
            }
            @if !differing.is_empty() {
                h2 { "Tools described differently" }
                p { "Workers of these tools describe them differently: calls may fail on some of them. Give every worker of a tool the same description, or another name." }
                ul #differing {
                    @for (worker, tools) in &differing {
                        @for (tool, said) in tools {
                            li { code { (worker.as_str()) } " describes " code { (tool.as_str()) } ": " (said) }
                        }
                    }
                }
            }
        }
    }
}
