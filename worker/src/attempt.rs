//! One claimed attempt: run the tool, keep the lease alive, stop within a
//! moment of a cancellation, and report the outcome exactly once.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use taskstore_proto::v1 as pb;
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;

use tracing::Instrument;

use crate::control::{Control, Stop};
use crate::follow::Followers;
use crate::metrics;
use crate::report::{Reported, Reporter};
use crate::tool::{Tool, ToolContext, ToolError, error_result, is_error};

/// How long an attempt runs before it starts following its task for a
/// cancellation: well under the second in which a cancellation must reach
/// the tool.
const WATCH_AFTER: Duration = Duration::from_millis(100);

/// Why a terminal task ended, as the watch sees it.
fn ended(status: pb::TaskStatus) -> Stop {
    match status {
        pb::TaskStatus::Cancelled => Stop::Cancelled,
        _ => Stop::Finished,
    }
}

/// Everything one attempt needs.
pub(crate) struct Attempt {
    pub tool_name: String,
    pub reporter: Reporter,
    pub tool: Arc<dyn Tool>,
    pub arguments: Value,
    pub attempt: u32,
    pub max_attempts: u32,
    pub lease_duration: Duration,
    /// How long a question may wait before the attempt parks.
    pub park_after: Duration,
    /// Fires when the worker session the attempt was claimed in is over;
    /// `None`: claimed without one, the attempt renews its own lease.
    pub session_over: Option<CancellationToken>,
    /// The worker's stream following its attempts.
    pub followers: Followers,
}

impl Attempt {
    /// Runs to the end. `abandon` fires when the worker's shutdown grace
    /// period is over.
    pub(crate) async fn run(self, abandon: CancellationToken) {
        let task_id = self.reporter.task_id.clone();
        let control = Arc::new(Control::new(self.park_after));
        // The guards' RPCs (renewals, the watch) belong to the job's trace.
        let here = tracing::Span::current();
        let alive = match self.session_over {
            // The session keeps the lease: nothing to renew per attempt.
            Some(over) => tokio::spawn(stop_on(over, Stop::LeaseLost, control.clone())),
            None => tokio::spawn(
                keep_lease(self.reporter.clone(), self.lease_duration, control.clone())
                    .instrument(here.clone()),
            ),
        };
        let guards = [
            tokio::spawn(
                follow_to_the_end(
                    self.followers.clone(),
                    self.reporter.clone(),
                    control.clone(),
                )
                .instrument(here.clone()),
            ),
            alive,
            tokio::spawn(stop_on(abandon, Stop::Shutdown, control.clone())),
        ];
        let ctx = ToolContext::new(
            control.clone(),
            self.reporter.clone(),
            self.attempt,
            self.max_attempts,
        );
        tracing::info!(attempt = self.attempt, "attempt started");
        let started = std::time::Instant::now();
        let run = tracing::info_span!(
            "tool run",
            otel.name = %format_args!("run {}", self.tool_name),
            otel.kind = "internal",
            mcp.task.id = %task_id,
            mcp.tool.name = %self.tool_name,
            attempt = self.attempt,
        );
        let outcome = self.tool.call(ctx, self.arguments).instrument(run).await;
        for guard in guards {
            guard.abort();
        }
        let ended = |outcome| metrics::attempt(&self.tool_name, outcome, started.elapsed());

        let reported = match (control.stopped(), outcome) {
            (
                Some(
                    reason @ (Stop::Cancelled
                    | Stop::Finished
                    | Stop::Gone
                    | Stop::LeaseLost
                    | Stop::Told),
                ),
                _,
            ) => {
                tracing::info!(%reason, "attempt stopped; nothing stored");
                ended("stopped");
                return;
            }
            (_, Ok(result)) => {
                let failed = is_error(&result);
                // A failed task says why in its status message, where
                // `list` and `watch` show it: the result's first words.
                let message = failed.then(|| first_text(&result)).flatten();
                let reported = self.reporter.result(&result, failed, message).await;
                (reported, if failed { "failed" } else { "completed" })
            }
            (_, Err(ToolError::Retryable(message))) => {
                let reported = self
                    .reporter
                    .release(pb::ReleaseReason::RetryableError, message)
                    .await;
                (reported, "released")
            }
            (_, Err(ToolError::BackOff { until, message })) => {
                let reported = self.reporter.back_off(until, message).await;
                (reported, "backed off")
            }
            (_, Err(ToolError::Permanent(message))) => {
                let reported = self
                    .reporter
                    .result(&error_result(&message), true, Some(message))
                    .await;
                (reported, "failed")
            }
            (Some(Stop::Shutdown), Err(ToolError::Cancelled)) => {
                let reported = self
                    .reporter
                    .release(pb::ReleaseReason::Shutdown, "worker shutting down".into())
                    .await;
                (reported, "released")
            }
            (Some(Stop::Parked), Err(ToolError::Cancelled)) => {
                let reported = self
                    .reporter
                    .release(pb::ReleaseReason::Parked, "waiting for an answer".into())
                    .await;
                (reported, "parked")
            }
            (None, Err(ToolError::Cancelled)) => {
                let message = "the tool cancelled itself".to_owned();
                let reported = self
                    .reporter
                    .result(&error_result(&message), true, Some(message))
                    .await;
                (reported, "failed")
            }
        };
        match reported {
            (Reported::Stored, outcome) => {
                tracing::info!("attempt reported");
                ended(outcome);
            }
            (Reported::Refused(reason), _) => {
                tracing::warn!(%reason, "report refused; the task moved on without this attempt");
                ended("stopped");
            }
            (Reported::Unreachable(error), _) => {
                tracing::error!(%error, "could not report; the lease will expire and the task run again");
                ended("unreported");
            }
        }
    }
}

/// Longest status message taken from a failed result's text.
const MAX_FAILURE_MESSAGE_BYTES: usize = 1024;

/// The first text item of a `CallToolResult`, cut to its first line and
/// at most [`MAX_FAILURE_MESSAGE_BYTES`].
fn first_text(result: &Value) -> Option<String> {
    let text = result
        .get("content")?
        .as_array()?
        .iter()
        .find(|item| item.get("type").and_then(Value::as_str) == Some("text"))?
        .get("text")?
        .as_str()?;
    let line = text.lines().find(|line| !line.trim().is_empty())?.trim();
    let mut end = line.len().min(MAX_FAILURE_MESSAGE_BYTES);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    Some(line[..end].to_owned())
}

async fn stop_on(trigger: CancellationToken, reason: Stop, control: Arc<Control>) {
    tokio::select! {
        () = trigger.cancelled() => control.stop(reason),
        () = control.cancel.cancelled() => {}
    }
}

/// Follows the task on the worker's WatchAttempts stream (until the
/// attempt ends and this is aborted, dropping the follow), or on a
/// WatchTask of its own when the service has no such stream.
async fn follow_to_the_end(followers: Followers, reporter: Reporter, control: Arc<Control>) {
    // Most tools finish in less than this: they are never followed.
    tokio::time::sleep(WATCH_AFTER).await;
    let unsupported = followers.unsupported();
    if !unsupported.is_cancelled() {
        let _following = followers.follow(
            &reporter.tenant_id,
            &reporter.task_id,
            &reporter.lease_token,
            control.clone(),
        );
        unsupported.cancelled().await;
    }
    watch_for_end(reporter, control).await;
}

/// Follows the task over WatchTask: a cancellation (or any terminal status
/// reached elsewhere) stops the tool within moments; any other change is
/// news for a tool waiting for an answer.
async fn watch_for_end(reporter: Reporter, control: Arc<Control>) {
    // The first message of a watch is the current state, so a
    // cancellation before it opened is still seen.
    loop {
        let request = reporter.in_tenant(pb::WatchTaskRequest {
            task_id: reporter.task_id.clone(),
            session_id: None,
            // A worker follows only the task its attempt runs.
            lease_token: Some(reporter.lease_token.clone()),
        });
        match reporter.clients().store.clone().watch_task(request).await {
            Ok(stream) => {
                let mut stream = stream.into_inner();
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(task) => {
                            let status = pb::TaskStatus::try_from(task.status)
                                .unwrap_or(pb::TaskStatus::Unspecified);
                            if status.is_terminal() {
                                return control.stop(ended(status));
                            }
                            control.changed.notify_waiters();
                        }
                        Err(status) if status.code() == tonic::Code::NotFound => {
                            return control.stop(Stop::Gone);
                        }
                        Err(_) => break,
                    }
                }
            }
            Err(status) if status.code() == tonic::Code::NotFound => {
                return control.stop(Stop::Gone);
            }
            Err(_) => {}
        }
        // The service may be restarting; lease renewal covers the gap.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Renews the lease a few times per lease period. When the service says
/// stop, or no renewal succeeded for a whole lease period (so the lease may
/// be gone), the tool is stopped.
async fn keep_lease(reporter: Reporter, lease: Duration, control: Arc<Control>) {
    let every = (lease / 3).max(Duration::from_millis(100));
    let mut last_renewed = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(every).await;
        let request = pb::RenewLeaseRequest {
            task_id: reporter.task_id.clone(),
            lease_token: reporter.lease_token.clone(),
            tenant_id: reporter.tenant_id.clone(),
        };
        match reporter
            .clients()
            .execution
            .clone()
            .renew_lease(request)
            .await
        {
            Ok(response) => {
                let response = response.into_inner();
                if !response.keep_running {
                    let reason = Stop::from(
                        pb::StopReason::try_from(response.stop_reason)
                            .unwrap_or(pb::StopReason::Unspecified),
                    );
                    tracing::info!(%reason, "told to stop");
                    return control.stop(reason);
                }
                last_renewed = tokio::time::Instant::now();
            }
            Err(status) => {
                tracing::warn!(error = %status.message(), "lease renewal failed");
                if last_renewed.elapsed() >= lease {
                    return control.stop(Stop::LeaseLost);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failed_result_says_why_in_its_first_text_line() {
        let result = json!({"content": [
            {"type": "image", "data": "", "mimeType": "image/png"},
            {"type": "text", "text": "\n  disk full  \nmore detail"},
            {"type": "text", "text": "second"}
        ], "isError": true});
        assert_eq!(first_text(&result), Some("disk full".into()));
        assert_eq!(first_text(&json!({"content": []})), None);
        assert_eq!(first_text(&json!({"isError": true})), None);
        let long = json!({"content": [{"type": "text", "text": "é".repeat(1000)}]});
        let cut = first_text(&long).expect("text");
        assert!(cut.len() <= MAX_FAILURE_MESSAGE_BYTES && cut.chars().all(|c| c == 'é'));
    }
}
