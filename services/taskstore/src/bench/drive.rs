//! The changes `mcp-streams` makes: the tasks it creates in some of its MCP
//! sessions (over gRPC, with the session's id and a progress token in the
//! stored request, as a `tools/call` with `_meta.progressToken` would make
//! them), then a steady rate of status changes to them (`UpdateTaskStatus`
//! working → working with a new message). Each message carries the task's
//! sequence number and the send time, so that a stream can tell which
//! change it got and how late.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use taskstore_proto::v1 as pb;
use tokio_util::sync::CancellationToken;

use super::stats::{Recorded, samples};
use super::walk::unix_micros;
use super::{BenchError, Shared};

const MESSAGE: &str = "bench change ";

/// A task the run changes.
#[derive(Debug, Clone)]
pub(crate) struct PlannedTask {
    pub id: String,
    /// The index of its session (and of that session's stream).
    pub session: usize,
}

/// The sessions, the tasks, and how far each task's changes went.
#[derive(Debug)]
pub(crate) struct Plan {
    pub sessions: Vec<String>,
    pub tasks: Vec<PlannedTask>,
    pub by_id: HashMap<String, usize>,
    /// Per task: the sequence number of its latest acknowledged change.
    pub acked: Vec<AtomicU64>,
}

impl Plan {
    /// Creates `per_session` tasks in each of `active` sessions, spread
    /// evenly over all of them.
    pub(crate) async fn create(
        shared: &Shared,
        sessions: Vec<String>,
        active: usize,
        per_session: usize,
    ) -> Result<Self, BenchError> {
        let active = active.min(sessions.len());
        let mut client = shared.client(0);
        let mut tasks = Vec::new();
        for n in 0..active {
            let session = n * sessions.len() / active.max(1);
            for _ in 0..per_session {
                let index = tasks.len();
                let request = serde_json::json!({
                    "jsonrpc": "2.0", "id": index, "method": "tools/call",
                    "params": {"name": "bench", "arguments": {"n": index},
                               "_meta": {"progressToken": token(index)}},
                });
                let created = client
                    .create_task(pb::CreateTaskRequest {
                        task_id: None,
                        session_id: Some(sessions[session].clone()),
                        ttl: None,
                        request_id_json: index.to_string(),
                        request_json: request.to_string(),
                        dispatch: None,
                        no_expiry: false,
                        poll_interval: None,
                        idempotency_key: None,
                    })
                    .await?
                    .into_inner();
                tasks.push(PlannedTask {
                    id: created.task_id,
                    session,
                });
            }
        }
        let by_id = tasks
            .iter()
            .enumerate()
            .map(|(index, task)| (task.id.clone(), index))
            .collect();
        let acked = tasks.iter().map(|_| AtomicU64::new(0)).collect();
        Ok(Self {
            sessions,
            tasks,
            by_id,
            acked,
        })
    }

    /// The latest acknowledged change of every task.
    pub(crate) fn acked_now(&self) -> Vec<u64> {
        self.acked
            .iter()
            .map(|n| n.load(Ordering::SeqCst))
            .collect()
    }
}

/// The progress token of task `index`.
pub(crate) fn token(index: usize) -> String {
    format!("p{index}")
}

/// The task a progress token names.
pub(crate) fn task_of_token(token: &str) -> Option<usize> {
    token.strip_prefix('p')?.parse().ok()
}

/// A change's sequence number and send time (µs since the epoch), from its
/// status message.
pub(crate) fn parse_message(message: &str) -> Option<(u64, u64)> {
    let (seq, sent) = message.strip_prefix(MESSAGE)?.split_once(" at ")?;
    let sent = sent.trim_end_matches('"');
    Some((seq.parse().ok()?, sent.parse().ok()?))
}

/// Changes the plan's tasks at `rate` per second in all, with
/// `--clients` clients (each owns its tasks, so that one task's changes
/// never race), until `stop`; returns the update latencies.
pub(crate) async fn changes(
    shared: &Shared,
    plan: &Arc<Plan>,
    rate: f64,
    stop: CancellationToken,
) -> Result<Recorded, BenchError> {
    let clients = shared.args.clients.clamp(1, plan.tasks.len().max(1));
    let gap = Duration::from_secs_f64(clients as f64 / rate.max(0.001));
    let padding: Arc<str> = "\"".repeat(shared.args.streams.message_padding).into();
    let mut running = tokio::task::JoinSet::new();
    for index in 0..clients {
        let (mut client, plan, stop) = (shared.client(index), plan.clone(), stop.clone());
        let padding = padding.clone();
        let owned: Vec<usize> = (index..plan.tasks.len()).step_by(clients).collect();
        running.spawn(async move {
            let mut recorded = Recorded::new();
            if owned.is_empty() {
                return Ok(recorded);
            }
            let mut next = Instant::now() + gap.mul_f64(index as f64 / clients as f64);
            for turn in 0.. {
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep_until(next.into()) => {}
                }
                next += gap;
                let task = owned[turn % owned.len()];
                let seq = plan.acked[task].load(Ordering::SeqCst) + 1;
                let started = Instant::now();
                client
                    .update_task_status(pb::UpdateTaskStatusRequest {
                        task_id: plan.tasks[task].id.clone(),
                        status: pb::TaskStatus::Working.into(),
                        status_message: Some(format!(
                            "{MESSAGE}{seq} at {}{padding}",
                            unix_micros()
                        )),
                        session_id: Some(plan.sessions[plan.tasks[task].session].clone()),
                        lease_token: None,
                    })
                    .await?;
                samples(&mut recorded, "update").record(started.elapsed());
                plan.acked[task].store(seq, Ordering::SeqCst);
            }
            Ok::<_, BenchError>(recorded)
        });
    }
    let mut recorded = Recorded::new();
    for outcome in running.join_all().await {
        super::stats::merge(&mut recorded, outcome?);
    }
    Ok(recorded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_tokens_read_back() {
        let message = format!("{MESSAGE}42 at 1764000000000001");
        assert_eq!(parse_message(&message), Some((42, 1_764_000_000_000_001)));
        assert_eq!(parse_message("slept 10 ms"), None);
        let padded = format!("{MESSAGE}7 at 1764000000000001\"\"\"");
        assert_eq!(parse_message(&padded), Some((7, 1_764_000_000_000_001)));
        assert_eq!(task_of_token(&token(17)), Some(17));
        assert_eq!(task_of_token("17"), None);
    }
}
