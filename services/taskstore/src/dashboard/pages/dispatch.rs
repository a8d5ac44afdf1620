//! A tool's dispatch as an operator of every tenant sees it (its keys carry
//! every tenant's values, so it is `Operation::ReadStatus`, as GetStatus's
//! `dispatch`): what waits and for how long, each key's running tasks
//! against its limit, its starts within its rate's window and its pause,
//! with a button that lifts the pause (`Operation::SteerDispatch`).

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::super::render::segment;
use crate::domain::ToolDispatch;

pub fn section(
    base: &str,
    tool: &str,
    dispatch: Option<&ToolDispatch>,
    may_lift: bool,
    now: DateTime<Utc>,
) -> Markup {
    html! {
        section #dispatch aria-labelledby="dispatch-title" {
            h2 #dispatch-title { "Dispatch" }
            @match dispatch {
                None => p { "Nothing waits, and no key of it is limited, rated or paused now." },
                Some(dispatch) => {
                    p {
                        (dispatch.waiting) " waiting"
                        @if dispatch.waiting > 0 {
                            ", the oldest for " (seconds(dispatch.oldest_wait.as_secs_f64()))
                        }
                        "."
                    }
                    @if !dispatch.keys.is_empty() {
                        table #dispatch-keys {
                            caption.visually-hidden { "Its keys: waiting, running against the limit, starts in the rate's window, pauses" }
                            thead { tr {
                                th scope="col" { "Key" } th scope="col" { "Waiting" } th scope="col" { "Running / limit" }
                                th scope="col" { "Starts in window" } th scope="col" { "Paused" }
                            } }
                            tbody {
                                @for key in &dispatch.keys {
                                    tr data-key=(key.key) {
                                        td { code { (if key.key.is_empty() { "(the whole tool)" } else { key.key.as_str() }) } }
                                        td.num { (key.waiting) }
                                        td.num {
                                            (key.running)
                                            @if let Some(max) = key.max_running { " / " (max) }
                                            @if key.full() { " " span.warn { "full" } }
                                        }
                                        td.num { (key.started) }
                                        td {
                                            @match key.paused_until {
                                                Some(until) if until > now => {
                                                    "for " (seconds((until - now).as_seconds_f64())) " more (until "
                                                    time datetime=(until.to_rfc3339()) { (until.format("%H:%M:%S UTC")) } ")"
                                                    @if may_lift {
                                                        form.inline method="post" action={ (base) "/tools/" (segment(tool)) "/lift-pause" } {
                                                            input type="hidden" name="key" value=(key.key);
                                                            button type="submit" { "Lift" }
                                                        }
                                                    }
                                                },
                                                _ => "–",
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                },
            }
        }
    }
}

/// Seconds, written for people.
fn seconds(secs: f64) -> String {
    if secs < 60.0 {
        format!("{secs:.1} s")
    } else {
        format!("{:.1} min", secs / 60.0)
    }
}
