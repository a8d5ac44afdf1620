//! The overview: counts by status, open questions, failures by tool in the
//! last hour, tasks created and finished per minute (a small chart drawn
//! as SVG on the server: no script, no style attribute), the fleet's
//! workers and busy slots, and, for those who see every tenant, the outbox.

use maud::{Markup, html};

use super::super::render::{query_value, status};
use crate::domain::{OutboxBacklog, Overview, WorkerInfo};

pub fn body(
    base: &str,
    overview: &Overview,
    workers: &[WorkerInfo],
    outbox: Option<&OutboxBacklog>,
) -> Markup {
    let slots: u32 = workers.iter().map(|w| w.heartbeat.slots).sum();
    let busy: u32 = workers.iter().map(|w| w.heartbeat.busy).sum();
    html! {
        h1 { "Overview" }
        div.cards {
            section aria-labelledby="counts-title" {
                h2 #counts-title { "Tasks by status" }
                table #counts {
                    thead { tr { th scope="col" { "Status" } th scope="col" { "Tasks" } } }
                    tbody {
                        @for (each, count) in &overview.by_status {
                            tr data-status=(each.as_str()) {
                                th scope="row" { a href={ (base) "/tasks?status=" (each.as_str()) } { (status(*each)) } }
                                td.count { (count) }
                            }
                        }
                    }
                }
            }
            section aria-labelledby="input-title" {
                h2 #input-title { "Waiting for input" }
                p { a href={ (base) "/questions" } { span #open-questions { (overview.open_questions) } @if overview.open_questions == 1 { " open question" } @else { " open questions" } } }
            }
            section aria-labelledby="fleet-title" {
                h2 #fleet-title { "Fleet" }
                p { (workers.len()) " workers, " (busy) " of " (slots) " slots busy. " a href={ (base) "/workers" } { "Workers" } }
                @if let Some(outbox) = outbox {
                    p { "Outbox: " (outbox.jobs) " jobs waiting to be published" }
                }
            }
        }
        section aria-labelledby="failures-title" {
            h2 #failures-title { "Failures in the last hour, by tool" }
            @if overview.failures_by_tool.is_empty() { p { "None." } }
            @else {
                table #failures {
                    thead { tr { th scope="col" { "Tool" } th scope="col" { "Failed" } } }
                    tbody {
                        @for (tool, count) in &overview.failures_by_tool {
                            tr {
                                th scope="row" {
                                    @match tool {
                                        Some(tool) => { a href={ (base) "/tasks?status=failed&tool=" (query_value(tool.as_str())) } { code { (tool.as_str()) } } },
                                        None => "(no tool)",
                                    }
                                }
                                td { (count) }
                            }
                        }
                    }
                }
            }
        }
        section aria-labelledby="rate-title" {
            h2 #rate-title { "Created and finished per minute, last hour" }
            (chart(overview))
        }
    }
}

/// Bars of created (upper) and finished (lower) per minute, with a text
/// alternative.
fn chart(overview: &Overview) -> Markup {
    let peak = overview
        .per_minute
        .iter()
        .map(|m| m.created.max(m.finished))
        .max()
        .unwrap_or(0)
        .max(1);
    let created: u64 = overview.per_minute.iter().map(|m| m.created).sum();
    let finished: u64 = overview.per_minute.iter().map(|m| m.finished).sum();
    let height = 40u64;
    let bar = |count: u64| count * height / peak;
    html! {
        figure {
            svg.chart viewBox="0 0 600 90" role="img" aria-label={ (created) " created and " (finished) " finished in the last hour; peak " (peak) " per minute" } {
                @for (i, minute) in overview.per_minute.iter().enumerate() {
                    rect.created x=(i * 10) y=(height - bar(minute.created)) width="8" height=(bar(minute.created)) {}
                    rect.finished x=(i * 10) y=(height + 10) width="8" height=(bar(minute.finished)) {}
                }
            }
            figcaption { "Upper bars: created (" (created) "); lower bars: finished (" (finished) "); peak " (peak) " a minute." }
        }
    }
}
