//! One claimed attempt: run the tool, keep the lease alive, stop within a
//! moment of a cancellation, and report the outcome exactly once.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;
use taskstore_proto::v1 as pb;
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::report::{Reported, Reporter};
use crate::tool::{Tool, ToolContext, ToolError, error_result, is_error};

/// How long an attempt runs before it starts following its task for a
/// cancellation: well under the second in which a cancellation must reach
/// the tool.
const WATCH_AFTER: Duration = Duration::from_millis(100);

/// Why an attempt stopped before its tool finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The task was cancelled, or finished elsewhere: store nothing.
    Ended,
    /// The lease is gone: another attempt may own the task; store nothing.
    LeaseLost,
    /// The worker is shutting down: give the task back.
    Shutdown,
}

/// Everything one attempt needs.
pub(crate) struct Attempt {
    pub reporter: Reporter,
    pub tool: Arc<dyn Tool>,
    pub arguments: Value,
    pub attempt: u32,
    pub max_attempts: u32,
    pub lease_duration: Duration,
}

impl Attempt {
    /// Runs to the end. `abandon` fires when the worker's shutdown grace
    /// period is over.
    pub(crate) async fn run(self, abandon: CancellationToken) {
        let task_id = self.reporter.task_id.clone();
        let cancel = CancellationToken::new();
        let stop = Arc::new(OnceLock::new());
        let guards = [
            tokio::spawn(watch_for_end(
                self.reporter.clone(),
                cancel.clone(),
                stop.clone(),
            )),
            tokio::spawn(keep_lease(
                self.reporter.clone(),
                self.lease_duration,
                cancel.clone(),
                stop.clone(),
            )),
            tokio::spawn(stop_on(
                abandon,
                Stop::Shutdown,
                cancel.clone(),
                stop.clone(),
            )),
        ];
        let ctx = ToolContext::new(
            cancel.clone(),
            self.reporter.clone(),
            self.attempt,
            self.max_attempts,
        );
        tracing::info!(%task_id, attempt = self.attempt, "attempt started");
        let outcome = self.tool.call(ctx, self.arguments).await;
        for guard in guards {
            guard.abort();
        }

        let reported = match (stop.get().copied(), outcome) {
            (Some(reason @ (Stop::Ended | Stop::LeaseLost)), _) => {
                tracing::info!(%task_id, ?reason, "attempt stopped; nothing stored");
                return;
            }
            (_, Ok(result)) => {
                let failed = is_error(&result);
                self.reporter.result(&result, failed, None).await
            }
            (_, Err(ToolError::Retryable(message))) => {
                self.reporter
                    .release(pb::ReleaseReason::RetryableError, message)
                    .await
            }
            (_, Err(ToolError::Permanent(message))) => {
                self.reporter
                    .result(&error_result(&message), true, Some(message))
                    .await
            }
            (Some(Stop::Shutdown), Err(ToolError::Cancelled)) => {
                self.reporter
                    .release(pb::ReleaseReason::Shutdown, "worker shutting down".into())
                    .await
            }
            (None, Err(ToolError::Cancelled)) => {
                let message = "the tool cancelled itself".to_owned();
                self.reporter
                    .result(&error_result(&message), true, Some(message))
                    .await
            }
        };
        match reported {
            Reported::Stored => tracing::info!(%task_id, "attempt reported"),
            Reported::Refused(reason) => {
                tracing::warn!(%task_id, %reason, "report refused; the task moved on without this attempt")
            }
            Reported::Unreachable(error) => {
                tracing::error!(%task_id, %error, "could not report; the lease will expire and the task run again")
            }
        }
    }
}

fn stop_now(stop: &OnceLock<Stop>, cancel: &CancellationToken, reason: Stop) {
    let _ = stop.set(reason);
    cancel.cancel();
}

async fn stop_on(
    trigger: CancellationToken,
    reason: Stop,
    cancel: CancellationToken,
    stop: Arc<OnceLock<Stop>>,
) {
    tokio::select! {
        () = trigger.cancelled() => stop_now(&stop, &cancel, reason),
        () = cancel.cancelled() => {}
    }
}

/// Follows the task over WatchTask: a cancellation (or any terminal status
/// reached elsewhere) stops the tool within moments.
async fn watch_for_end(reporter: Reporter, cancel: CancellationToken, stop: Arc<OnceLock<Stop>>) {
    // Most tools finish in less than this: they never open a stream (one RPC
    // and one read fewer per task). The first message of a watch is the
    // current state, so a cancellation in the meantime is still seen.
    tokio::time::sleep(WATCH_AFTER).await;
    loop {
        let request = pb::WatchTaskRequest {
            task_id: reporter.task_id.clone(),
            session_id: None,
        };
        match reporter.clients().store.clone().watch_task(request).await {
            Ok(stream) => {
                let mut stream = stream.into_inner();
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(task) if is_terminal(task.status) => {
                            return stop_now(&stop, &cancel, Stop::Ended);
                        }
                        Ok(_) => {}
                        Err(status) if status.code() == tonic::Code::NotFound => {
                            return stop_now(&stop, &cancel, Stop::Ended);
                        }
                        Err(_) => break,
                    }
                }
            }
            Err(status) if status.code() == tonic::Code::NotFound => {
                return stop_now(&stop, &cancel, Stop::Ended);
            }
            Err(_) => {}
        }
        // The service may be restarting; lease renewal covers the gap.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn is_terminal(status: i32) -> bool {
    matches!(
        pb::TaskStatus::try_from(status),
        Ok(pb::TaskStatus::Completed | pb::TaskStatus::Failed | pb::TaskStatus::Cancelled)
    )
}

/// Renews the lease a few times per lease period. When the service says
/// stop, or no renewal succeeded for a whole lease period (so the lease may
/// be gone), the tool is stopped.
async fn keep_lease(
    reporter: Reporter,
    lease: Duration,
    cancel: CancellationToken,
    stop: Arc<OnceLock<Stop>>,
) {
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
                    tracing::info!(task_id = %reporter.task_id, reason = %response.reason, "told to stop");
                    let reason = if response.reason.contains("lease") {
                        Stop::LeaseLost
                    } else {
                        Stop::Ended
                    };
                    return stop_now(&stop, &cancel, reason);
                }
                last_renewed = tokio::time::Instant::now();
            }
            Err(status) => {
                tracing::warn!(task_id = %reporter.task_id, error = %status.message(), "lease renewal failed");
                if last_renewed.elapsed() >= lease {
                    return stop_now(&stop, &cancel, Stop::LeaseLost);
                }
            }
        }
    }
}
