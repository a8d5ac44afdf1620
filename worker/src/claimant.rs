//! Claiming a delivered job: the claim decides whether it runs at all (a
//! stale or duplicated job is refused and dropped), and a claimed job's
//! delivery is acknowledged at once, since the service's lease now owns the
//! task's fate. Then the attempt runs.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use taskstore_proto::jobs::JobMessage;
use taskstore_proto::v1 as pb;
use tokio_util::sync::CancellationToken;
use tonic::Code;

use taskstore_telemetry::propagation::{set_parent, trace_id_of};
use tracing::Instrument;

use crate::attempt::Attempt;
use crate::delivery::JobDelivery;
use crate::follow::Followers;
use crate::metrics;
use crate::report::{Clients, Reporter};
use crate::session::OpenSession;
use crate::tool::Tool;

/// How long the ack of a claimed job may take before the attempt runs anyway.
const ACK_WITHIN: Duration = Duration::from_secs(2);

/// Everything needed to claim one delivered job and run it.
pub(crate) struct Claimant {
    pub(crate) clients: Clients,
    pub(crate) worker_id: String,
    pub(crate) tool_name: String,
    pub(crate) tool: Option<Arc<dyn Tool>>,
    /// Where the job came from, for its span: the messaging system and the
    /// queue.
    pub(crate) system: &'static str,
    pub(crate) queue: String,
    /// How long a question may wait before the attempt parks.
    pub(crate) park_after: Duration,
    /// The worker's session when the job arrived, if one was open.
    pub(crate) session: Option<OpenSession>,
    pub(crate) followers: Followers,
}

impl Claimant {
    /// Claims the job's task and, when the claim succeeds, runs it, in the
    /// span of processing the job: a child of the trace the job carries.
    pub(crate) async fn claim_and_run(
        self,
        delivery: Box<dyn JobDelivery>,
        abandon: CancellationToken,
    ) {
        let job = match JobMessage::from_bytes(delivery.data()) {
            Ok(job) if job.tool == self.tool_name => job,
            other => {
                tracing::warn!(?other, "malformed job dropped");
                metrics::job(&self.tool_name, "malformed");
                delivery.reject().await;
                return;
            }
        };
        let span = tracing::info_span!(
            "job process",
            otel.name = %format_args!("{} process", self.queue),
            otel.kind = "consumer",
            messaging.system = self.system,
            messaging.destination.name = %self.queue,
            messaging.operation.type = "process",
            mcp.task.id = %job.task_id,
            mcp.tool.name = %job.tool,
            task_id = %job.task_id,
            trace_id = tracing::field::Empty,
        );
        if let Some(parent) = delivery.trace_context() {
            set_parent(&span, &parent);
        }
        if let Some(trace_id) = trace_id_of(&span) {
            span.record("trace_id", trace_id);
        }
        self.process(job, delivery, abandon).instrument(span).await;
    }

    async fn process(
        self,
        job: JobMessage,
        delivery: Box<dyn JobDelivery>,
        abandon: CancellationToken,
    ) {
        let Some(tool) = self.tool else {
            delivery.requeue().await;
            return;
        };
        let request = pb::ClaimTaskRequest {
            task_id: job.task_id.clone(),
            generation: job.generation,
            worker_id: self.worker_id,
            tenant_id: job.tenant_id.clone(),
            session_id: self
                .session
                .as_ref()
                .map(|s| s.id.clone())
                .unwrap_or_default(),
        };
        let claim = match self.clients.execution.clone().claim_task(request).await {
            Ok(claim) => claim.into_inner(),
            Err(status)
                if matches!(
                    status.code(),
                    Code::FailedPrecondition | Code::NotFound | Code::InvalidArgument
                ) =>
            {
                tracing::info!(reason = %status.message(), "stale job dropped");
                metrics::job(&self.tool_name, "stale");
                delivery.ack().await;
                return;
            }
            Err(status) => {
                tracing::warn!(error = %status.message(), "cannot claim now; job back to the queue");
                metrics::job(&self.tool_name, "requeued");
                tokio::time::sleep(Duration::from_secs(1)).await;
                delivery.requeue().await;
                return;
            }
        };
        // Claimed: PostgreSQL now owns the task's fate (lease, reaper), so
        // the delivery is done, however long the task runs. The ack must not
        // hold the attempt back: on a broker connection that just dropped it
        // can wait forever, while the worker's session keeps the claimed
        // attempt alive, so the task would never run nor be reaped. Unacked,
        // the job comes back and is dropped as stale.
        if tokio::time::timeout(ACK_WITHIN, delivery.ack())
            .await
            .is_err()
        {
            tracing::warn!("the queue did not take the ack of a claimed job; running it anyway");
        }
        metrics::job(&self.tool_name, "claimed");
        let attempt = Attempt {
            tool_name: self.tool_name,
            reporter: Reporter::new(self.clients, job.tenant_id, job.task_id, claim.lease_token),
            tool,
            arguments: arguments_of(&claim.request_json),
            attempt: claim.attempt,
            max_attempts: claim.max_attempts,
            lease_duration: claim
                .lease_duration
                .and_then(|d| Duration::try_from(d).ok())
                .unwrap_or(Duration::from_secs(15)),
            park_after: self.park_after,
            // Claimed in a session already over (this worker has not heard
            // yet): the attempt renews its own lease, as without a session.
            session_over: self.session.filter(|_| claim.in_session).map(|s| s.over),
            followers: self.followers,
        };
        attempt.run(abandon).await;
    }
}

/// `params.arguments` of a `tools/call` request; `{}` when absent.
fn arguments_of(request_json: &str) -> Value {
    serde_json::from_str::<Value>(request_json)
        .ok()
        .and_then(|request| request.get("params")?.get("arguments").cloned())
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()))
}
