//! The system page, for credentials that reach every tenant: the whole
//! store's tasks by status, the outbox, the fleet. Nothing of one tenant.

use maud::{Markup, html};

use super::super::render::status;
use crate::domain::{OutboxBacklog, TaskStatus, WorkerInfo};

pub fn body(
    by_status: &[(TaskStatus, u64)],
    outbox: &OutboxBacklog,
    workers: &[WorkerInfo],
) -> Markup {
    let slots: u32 = workers.iter().map(|w| w.heartbeat.slots).sum();
    let busy: u32 = workers.iter().map(|w| w.heartbeat.busy).sum();
    html! {
        h1 { "System" }
        p { "Every tenant together: what this store holds and what its fleet does." }
        section aria-labelledby="all-title" {
            h2 #all-title { "Tasks of every tenant, by status" }
            table #system-counts {
                thead { tr { th scope="col" { "Status" } th scope="col" { "Tasks" } } }
                tbody {
                    @for each in TaskStatus::ALL {
                        tr data-status=(each.as_str()) {
                            th scope="row" { (status(each)) }
                            td.count { (by_status.iter().find(|(s, _)| *s == each).map_or(0, |(_, n)| *n)) }
                        }
                    }
                }
            }
        }
        section aria-labelledby="outbox-title" {
            h2 #outbox-title { "Outbox" }
            p { (outbox.jobs) " jobs waiting to be published, " (outbox.due) " due now"
                @if outbox.due > 0 { ", the oldest due for " (humantime::format_duration(std::time::Duration::from_secs(outbox.oldest_due_age.as_secs()))) }
                "." }
        }
        section aria-labelledby="fleet-title" {
            h2 #fleet-title { "Fleet" }
            p { (workers.len()) " workers, " (busy) " of " (slots) " slots busy." }
        }
    }
}
