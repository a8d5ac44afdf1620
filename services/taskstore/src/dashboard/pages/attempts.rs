//! A task's attempts as a timeline, oldest first: who ran each, from when
//! to when, and how it ended; a note when older ones were dropped (the
//! history keeps the newest `MAX_ATTEMPT_RECORDS`).

use maud::{Markup, html};

use super::super::render::time;
use crate::domain::{AttemptEnd, AttemptOutcome, AttemptRecord, TaskDetails, TaskStatus};

pub fn timeline(details: &TaskDetails) -> Markup {
    let dropped = details.attempts_dropped;
    html! {
        section #attempts-section aria-labelledby="attempts-title" {
            h2 #attempts-title { "Attempts" }
            @if dropped > 0 {
                p #attempts-dropped {
                    (dropped) " older " (if dropped == 1 { "attempt is" } else { "attempts are" })
                    " not shown: only the newest " (details.attempts.len()) " are kept."
                }
            }
            @if details.attempts.is_empty() {
                p { "No attempt yet." }
            } @else {
                ol #attempts {
                    @for record in &details.attempts { (item(record)) }
                }
            }
        }
    }
}

fn item(record: &AttemptRecord) -> Markup {
    html! {
        li data-attempt=(record.attempt) data-end=(record.end.as_ref().map_or("running", AttemptOutcome::kind)) {
            "Attempt " (record.attempt) " on " code { (record.worker) }
            ", started " (time(record.started_at))
            @match (record.ended_at, &record.end) {
                (Some(ended), Some(end)) => { ", ended " (time(ended)) ": " (ending(end)) },
                _ => { ": still running" },
            }
        }
    }
}

/// How an attempt ended, in words.
fn ending(end: &AttemptOutcome) -> Markup {
    let (what, message) = match end {
        AttemptOutcome::Finished { status, message } => (
            match status {
                TaskStatus::Completed => "completed",
                TaskStatus::Failed => "failed with a result",
                TaskStatus::Cancelled => "cancelled",
                TaskStatus::Working | TaskStatus::InputRequired => "ended",
            },
            message.as_deref(),
        ),
        AttemptOutcome::WithoutResult(end) => match end {
            AttemptEnd::RetryableFailure { error } => {
                ("released after a retryable error", Some(error.as_str()))
            }
            AttemptEnd::Shutdown => ("given back: its worker shut down", None),
            AttemptEnd::LeaseExpired => ("lease expired: its worker stopped renewing it", None),
            AttemptEnd::Parked => ("parked until its questions are answered", None),
            AttemptEnd::BackOff { message, .. } => (
                "given back: its tool was told to wait",
                Some(message.as_str()),
            ),
        },
    };
    html! {
        strong { (what) }
        @if let Some(message) = message.filter(|m| !m.is_empty()) { " — " q { (message) } }
    }
}
