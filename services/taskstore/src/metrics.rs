//! The service's metrics, named and labelled in this one place (Prometheus
//! conventions: `taskstore_` prefix, base units in the name, `_total` for
//! counters; labels of bounded cardinality: RPC names, gRPC codes, task
//! statuses, causes, and tool names, which only workers' registrations
//! bring in — never a task id). Recorded through the `metrics` facade: until
//! `--metrics-listen` installs the exporter, every call is a no-op.

use std::time::{Duration, Instant};

use metrics::{counter, gauge, histogram};

use crate::domain::{AttemptEnd, NextStep, OutboxBacklog, TaskStatus};

/// Exports, at zero, the series that count rare events, so that a panel or
/// an alert over them sees 0 on a healthy system rather than no data (a
/// counter exists only once incremented). The label values are every one
/// the service records.
pub fn export_at_zero() {
    for cause in ["retryable_error", "shutdown", "lease_expired", "parked"] {
        counter!("taskstore_poison_failures_total", "cause" => cause).increment(0);
    }
    for limit in ["create_rate", "waiting_calls"] {
        counter!("taskstore_admission_refused_total", "limit" => limit).increment(0);
    }
    for condition in [
        "disk_full",
        "out_of_memory",
        "too_many_connections",
        "configuration_limit_exceeded",
        "insufficient_resources",
    ] {
        counter!("taskstore_database_resource_refusals_total", "condition" => condition)
            .increment(0);
    }
    counter!("taskstore_jobs_held_total").increment(0);
    counter!("taskstore_idempotent_replays_total").increment(0);
    counter!("taskstore_tasks_scheduled_total").increment(0);
    gauge!("taskstore_queue_blocked").set(0.0);
}

/// A dashboard action was taken (`login`, `cancel`, `delete`, `answer`,
/// `run`): who did it is in the log line beside it.
pub fn dashboard_action(action: &'static str) {
    counter!("taskstore_dashboard_actions_total", "action" => action).increment(1);
}

/// An RPC ended with `code` (its name), `started` when it arrived.
pub fn rpc_ended(service: &str, method: &str, code: &'static str, started: Instant) {
    let labels = [
        ("service", service.to_owned()),
        ("method", method.to_owned()),
        ("code", code.to_owned()),
    ];
    counter!("taskstore_rpc_requests_total", &labels).increment(1);
    histogram!("taskstore_rpc_duration_seconds", &labels).record(started.elapsed());
}

/// An MCP request to `/mcp` was answered: its method (`mcp::methods`
/// bounds the names), the protocol revision, and `ok` or the JSON-RPC
/// error code.
pub fn mcp_request_ended(
    method: &'static str,
    revision: &'static str,
    outcome: &str,
    started: Instant,
) {
    let labels = [
        ("method", method.to_owned()),
        ("revision", revision.to_owned()),
        ("outcome", outcome.to_owned()),
    ];
    counter!("taskstore_mcp_requests_total", &labels).increment(1);
    histogram!("taskstore_mcp_request_duration_seconds", &labels).record(started.elapsed());
}

/// A task was created (counted by the store that created it, whatever
/// edge asked: gRPC, `/mcp`).
pub fn task_created(dispatched: bool) {
    counter!("taskstore_tasks_created_total", "dispatched" => if dispatched { "true" } else { "false" })
        .increment(1);
}

/// A create carrying an idempotency key was answered with the task the
/// key already named (a client's retry), creating nothing.
pub fn idempotent_replay() {
    counter!("taskstore_idempotent_replays_total").increment(1);
}

/// A dispatched task was created to start later (`Dispatch.start_*`).
pub fn task_scheduled() {
    counter!("taskstore_tasks_scheduled_total").increment(1);
}

/// A task reached a terminal status (once per task, where it happened).
pub fn task_finished(status: TaskStatus) {
    if status.is_terminal() {
        counter!("taskstore_tasks_finished_total", "status" => status.as_str()).increment(1);
    }
}

/// The sweep deleted `count` expired tasks.
pub fn tasks_expired(count: u64) {
    counter!("taskstore_tasks_expired_total").increment(count);
}

/// What the execution protocol decided for an attempt that ended without
/// a result (`end`): a retry, or, out of attempts, a poison failure.
pub fn attempt_ended(end: &AttemptEnd, next: &NextStep) {
    let cause = end.cause();
    if let AttemptEnd::LeaseExpired = end {
        counter!("taskstore_lease_expiries_total").increment(1);
    }
    match next {
        NextStep::Redispatch { .. } => {
            counter!("taskstore_retries_total", "cause" => cause).increment(1);
        }
        NextStep::Fail { .. } => {
            counter!("taskstore_poison_failures_total", "cause" => cause).increment(1);
            task_finished(TaskStatus::Failed);
        }
        NextStep::Park { .. } => {
            counter!("taskstore_parks_total").increment(1);
        }
        NextStep::Unchanged => {}
    }
}

/// A task was claimed for its first attempt `waited` after it was created.
pub fn claimed(tool: &str, attempt: u32, waited: Option<Duration>) {
    counter!("taskstore_claims_total", "tool" => tool.to_owned()).increment(1);
    if let (1, Some(waited)) = (attempt, waited) {
        histogram!("taskstore_queue_wait_seconds", "tool" => tool.to_owned()).record(waited);
    }
}

/// A call was refused by a tenant's admission limit (`create_rate`,
/// `waiting_calls`).
pub fn admission_refused(limit: &'static str) {
    counter!("taskstore_admission_refused_total", "limit" => limit).increment(1);
}

/// The relay published jobs, or held jobs no worker takes.
pub fn jobs_relayed(published: u64) {
    counter!("taskstore_jobs_published_total").increment(published);
}

pub fn job_held() {
    counter!("taskstore_jobs_held_total").increment(1);
}

/// A call the database refused for want of a resource (`label`: which).
pub fn database_refusal(label: &'static str) {
    counter!("taskstore_database_resource_refusals_total", "condition" => label).increment(1);
}

/// Whether the broker blocks the relay's publishes (a resource alarm).
pub fn queue_blocked(blocked: bool) {
    gauge!("taskstore_queue_blocked").set(if blocked { 1.0 } else { 0.0 });
}

/// Whether the relay reaches the job queue.
pub fn queue_up(up: bool) {
    gauge!("taskstore_queue_up").set(if up { 1.0 } else { 0.0 });
}

/// A snapshot of the store: tasks by status and the outbox backlog.
pub fn snapshot(by_status: &[(TaskStatus, u64)], backlog: &OutboxBacklog) {
    for status in TaskStatus::ALL {
        let count = by_status
            .iter()
            .find(|(s, _)| *s == status)
            .map_or(0, |(_, n)| *n);
        gauge!("taskstore_tasks", "status" => status.as_str()).set(count as f64);
    }
    gauge!("taskstore_outbox_jobs").set(backlog.jobs as f64);
    gauge!("taskstore_outbox_jobs_due").set(backlog.due as f64);
    gauge!("taskstore_outbox_oldest_due_seconds").set(backlog.oldest_due_age.as_secs_f64());
}

/// The tools the last dispatch snapshot reported: one gone from the next
/// is set to zero rather than left at its last value.
static DISPATCH_TOOLS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Governed dispatch per tool: jobs waiting for room and the oldest wait,
/// keys at their concurrency limit, keys paused (per tool, never per key:
/// keys carry tenants' and arguments' values, and would be unbounded).
pub fn dispatch_snapshot(tools: &[crate::domain::ToolDispatch]) {
    let mut reported = DISPATCH_TOOLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for gone in reported
        .iter()
        .filter(|name| !tools.iter().any(|tool| &tool.tool == *name))
    {
        set_dispatch(gone.clone(), 0, 0.0, 0, 0);
    }
    for tool in tools {
        let full = tool.keys.iter().filter(|key| key.full()).count();
        let paused = tool
            .keys
            .iter()
            .filter(|key| key.paused_until.is_some())
            .count();
        set_dispatch(
            tool.tool.clone(),
            tool.waiting,
            tool.oldest_wait.as_secs_f64(),
            full,
            paused,
        );
    }
    *reported = tools.iter().map(|tool| tool.tool.clone()).collect();
}

fn set_dispatch(tool: String, waiting: u64, oldest: f64, full: usize, paused: usize) {
    gauge!("taskstore_dispatch_waiting", "tool" => tool.clone()).set(waiting as f64);
    gauge!("taskstore_dispatch_oldest_wait_seconds", "tool" => tool.clone()).set(oldest);
    gauge!("taskstore_dispatch_keys_full", "tool" => tool.clone()).set(full as f64);
    gauge!("taskstore_dispatch_keys_paused", "tool" => tool).set(paused as f64);
}
