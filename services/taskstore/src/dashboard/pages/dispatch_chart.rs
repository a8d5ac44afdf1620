//! A tool's waiting and running per key over the last hour, drawn from the
//! dashboard's samples (`domain::dispatch_history`): a line per series,
//! each row scaled to its own peak, with a table of the same numbers as
//! its text alternative. For operators of every tenant, as the dispatch
//! section above it.

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use crate::domain::dispatch_history::{HISTORY_SPAN, ToolHistory};

const WIDTH: f64 = 600.0;
const ROW: f64 = 40.0;
const GAP: f64 = 16.0;

pub fn section(history: &ToolHistory) -> Markup {
    let Some(&end) = history.times.last() else {
        return html! {};
    };
    let rows: Vec<(String, Vec<u64>, Option<Vec<u64>>)> = std::iter::once((
        "(all keys) waiting".to_owned(),
        history.waiting.clone(),
        None,
    ))
    .chain(history.keys.iter().map(|key| {
        let name = if key.key.is_empty() {
            "(the whole tool)"
        } else {
            &key.key
        };
        (
            name.to_owned(),
            key.waiting.clone(),
            Some(key.running.iter().map(|&n| u64::from(n)).collect()),
        )
    }))
    .collect();
    let height = rows.len() as f64 * (ROW + GAP);
    html! {
        section #dispatch-history aria-labelledby="history-title" {
            h2 #history-title { "Waiting and running per key, last hour" }
            figure {
                svg.chart.history viewBox={ "0 0 " (WIDTH) " " (height) } role="img"
                    aria-label={ "Waiting and running of " (history.keys.len()) " keys over the last hour; the table below has the numbers" } {
                    @for (i, (name, waiting, running)) in rows.iter().enumerate() {
                        @let top = i as f64 * (ROW + GAP);
                        @let peak = waiting.iter().chain(running.iter().flatten()).copied().max().unwrap_or(0).max(1);
                        text x="0" y=(top + 11.0) { (name) }
                        polyline.waiting points=(points(&history.times, waiting, end, top + GAP, peak)) {}
                        @if let Some(running) = running {
                            polyline.running points=(points(&history.times, running, end, top + GAP, peak)) {}
                        }
                    }
                }
                figcaption { "Lines: waiting (solid) and running (dashed) per key, each row scaled to its own peak; " (history.times.len()) " samples, the last at " time datetime=(end.to_rfc3339()) { (end.format("%H:%M:%S UTC")) } "." }
            }
            table #dispatch-history-table {
                caption.visually-hidden { "Waiting and running per key over the last hour: now and at the peak" }
                thead { tr {
                    th scope="col" { "Key" } th scope="col" { "Waiting now" } th scope="col" { "Waiting at most" }
                    th scope="col" { "Running now" } th scope="col" { "Running at most" }
                } }
                tbody {
                    @for key in &history.keys {
                        tr data-key=(key.key) {
                            td { code { (if key.key.is_empty() { "(the whole tool)" } else { key.key.as_str() }) } }
                            td.num { (key.waiting.last().copied().unwrap_or(0)) }
                            td.num { (key.waiting.iter().max().copied().unwrap_or(0)) }
                            td.num { (key.running.last().copied().unwrap_or(0)) }
                            td.num { (key.running.iter().max().copied().unwrap_or(0)) }
                        }
                    }
                }
            }
        }
    }
}

/// The polyline of `values` at `times`, the hour ending at `end` across
/// the width, `peak` at the row's top.
fn points(
    times: &[DateTime<Utc>],
    values: &[u64],
    end: DateTime<Utc>,
    top: f64,
    peak: u64,
) -> String {
    let span = HISTORY_SPAN.as_secs_f64();
    times
        .iter()
        .zip(values)
        .map(|(at, value)| {
            let age = (end - *at).as_seconds_f64().clamp(0.0, span);
            let x = WIDTH * (1.0 - age / span);
            let y = top + ROW * (1.0 - *value as f64 / peak as f64);
            format!("{x:.1},{y:.1}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}
