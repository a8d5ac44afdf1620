//! The worker's metrics, named and labelled in this one place (`taskworker_`
//! prefix, base units, `_total` counters; labels: tool names this worker
//! serves and outcomes). No-ops until `--metrics-listen` installs the
//! exporter.

use std::time::Duration;

use metrics::{counter, gauge, histogram};

/// The worker's attempt slots, set once at start.
pub(crate) fn slots(total: usize) {
    gauge!("taskworker_slots").set(total as f64);
    gauge!("taskworker_slots_busy").set(0.0);
}

/// A slot was taken (`true`) or given back.
pub(crate) fn slot_busy(taken: bool) {
    let gauge = gauge!("taskworker_slots_busy");
    if taken {
        gauge.increment(1.0);
    } else {
        gauge.decrement(1.0);
    }
}

/// What became of a delivered job: `claimed`, `stale` (the claim was
/// refused: the job was old or a duplicate), `requeued`, or `malformed`.
pub(crate) fn job(tool: &str, result: &'static str) {
    counter!("taskworker_jobs_total", "tool" => tool.to_owned(), "result" => result).increment(1);
}

/// An attempt ended: `completed`, `failed`, `released` (a retryable error
/// or shutdown), `stopped` (cancelled, finished elsewhere, lease lost) or
/// `unreported` (the service stayed unreachable), after `ran`.
pub(crate) fn attempt(tool: &str, outcome: &'static str, ran: Duration) {
    let labels = [("tool", tool.to_owned()), ("outcome", outcome.to_owned())];
    counter!("taskworker_attempts_total", &labels).increment(1);
    histogram!("taskworker_attempt_duration_seconds", &labels).record(ran);
}
