//! Reports from a running attempt to the service, each fenced by the
//! attempt's lease so that a worker that lost its task cannot touch it.

use std::time::Duration;

use serde_json::Value;
use taskstore_proto::credentials::BearerToken;
use taskstore_proto::v1 as pb;
use taskstore_telemetry::grpc::ClientTracing;
use tonic::Code;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use pb::task_execution_client::TaskExecutionClient;
use pb::task_store_client::TaskStoreClient;
use taskstore_proto::protocol::{REFUSAL_STATUS_KEY, REFUSED_LEASE_LOST, REFUSED_TERMINAL};
use tonic_types::StatusExt as _;

use crate::control::Stop;

/// How long a final report is retried while the service is unreachable;
/// past the lease the task belongs to someone else anyway.
const REPORT_RETRY_FOR: Duration = Duration::from_secs(60);

/// A channel whose calls carry the worker's credentials and the trace
/// context, and get client spans.
pub type Traced = InterceptedService<ClientTracing<Channel>, BearerToken>;

/// The gRPC clients a worker's attempts talk to the service with: every
/// call is a span of the attempt's trace.
#[derive(Debug, Clone)]
pub struct Clients {
    pub store: TaskStoreClient<Traced>,
    pub execution: TaskExecutionClient<Traced>,
}

impl Clients {
    pub fn new(channel: Channel, token: BearerToken) -> Self {
        let traced = InterceptedService::new(ClientTracing::new(channel), token);
        Self {
            store: TaskStoreClient::new(traced.clone()),
            execution: TaskExecutionClient::new(traced),
        }
    }
}

/// Reports for one attempt.
#[derive(Debug, Clone)]
pub struct Reporter {
    clients: Clients,
    pub(crate) tenant_id: String,
    pub(crate) task_id: String,
    pub(crate) lease_token: String,
}

/// What became of a final report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reported {
    Stored,
    /// The service refused it: the lease was lost or the task is terminal.
    Refused(String),
    /// The service stayed unreachable.
    Unreachable(String),
}

impl Reporter {
    pub fn new(clients: Clients, tenant_id: String, task_id: String, lease_token: String) -> Self {
        Self {
            clients,
            tenant_id,
            task_id,
            lease_token,
        }
    }

    pub(crate) fn clients(&self) -> &Clients {
        &self.clients
    }

    /// `message` as a request in the attempt's tenant: a worker of a shared
    /// fleet acts in the tenant of each job it runs.
    pub(crate) fn in_tenant<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Ok(tenant) = self.tenant_id.parse()
            && !self.tenant_id.is_empty()
        {
            request
                .metadata_mut()
                .insert(taskstore_proto::TENANT_METADATA, tenant);
        }
        request
    }

    /// Progress; `Some` when the service says the attempt is over (see
    /// [`stop_of_refusal`]).
    pub(crate) async fn working(&self, message: String) -> Option<Stop> {
        self.status(pb::TaskStatus::Working, message).await
    }

    pub(crate) async fn input_required(&self, message: String) -> Option<Stop> {
        self.status(pb::TaskStatus::InputRequired, message).await
    }

    /// Progress is best effort: a lost update is not worth failing the task.
    async fn status(&self, status: pb::TaskStatus, message: String) -> Option<Stop> {
        let request = pb::UpdateTaskStatusRequest {
            task_id: self.task_id.clone(),
            status: status.into(),
            status_message: Some(message),
            session_id: None,
            lease_token: Some(self.lease_token.clone()),
        };
        let request = self.in_tenant(request);
        let err = self
            .clients
            .store
            .clone()
            .update_task_status(request)
            .await
            .err()?;
        tracing::warn!(error = %err.message(), "progress update not stored");
        stop_of_refusal(&err)
    }

    /// Stores the attempt's result: COMPLETED, or FAILED when it says
    /// `isError: true`.
    pub async fn result(&self, result: &Value, failed: bool, message: Option<String>) -> Reported {
        let status = if failed {
            pb::TaskStatus::Failed
        } else {
            pb::TaskStatus::Completed
        };
        let request = pb::StoreTaskResultRequest {
            task_id: self.task_id.clone(),
            status: status.into(),
            result_json: result.to_string(),
            session_id: None,
            status_message: message,
            lease_token: Some(self.lease_token.clone()),
        };
        self.retrying(|| {
            let mut client = self.clients.store.clone();
            let request = self.in_tenant(request.clone());
            async move { client.store_task_result(request).await.map(|_| ()) }
        })
        .await
    }

    /// Gives the task back (retryable error, or shutdown).
    pub async fn release(&self, reason: pb::ReleaseReason, message: String) -> Reported {
        self.give_back(reason, None, message).await
    }

    /// Gives the task back until `until`: its tool was told to wait.
    pub async fn back_off(&self, until: std::time::SystemTime, message: String) -> Reported {
        let until = prost_types::Timestamp::from(until);
        self.give_back(pb::ReleaseReason::BackOff, Some(until), message)
            .await
    }

    async fn give_back(
        &self,
        reason: pb::ReleaseReason,
        back_off_until: Option<prost_types::Timestamp>,
        message: String,
    ) -> Reported {
        let request = pb::ReleaseTaskRequest {
            back_off_until,
            task_id: self.task_id.clone(),
            lease_token: self.lease_token.clone(),
            reason: reason.into(),
            message,
            tenant_id: self.tenant_id.clone(),
        };
        self.retrying(|| {
            let mut client = self.clients.execution.clone();
            let request = request.clone();
            async move { client.release_task(request).await.map(|_| ()) }
        })
        .await
    }

    async fn retrying<F, Fut>(&self, mut call: F) -> Reported
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(), tonic::Status>>,
    {
        let deadline = tokio::time::Instant::now() + REPORT_RETRY_FOR;
        let mut delay = Duration::from_millis(100);
        loop {
            match call().await {
                Ok(()) => return Reported::Stored,
                Err(status)
                    if matches!(
                        status.code(),
                        Code::FailedPrecondition
                            | Code::NotFound
                            | Code::InvalidArgument
                            // Credentials a retry will not change.
                            | Code::Unauthenticated
                            | Code::PermissionDenied
                    ) =>
                {
                    return Reported::Refused(status.message().to_owned());
                }
                Err(status) if tokio::time::Instant::now() >= deadline => {
                    return Reported::Unreachable(status.message().to_owned());
                }
                Err(status) => {
                    tracing::warn!(error = %status.message(), "report failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}

/// Why an attempt must stop, when the service refused one of its reports
/// because the attempt is over: its task ended (a cancellation this worker
/// has not heard of yet) or another claim holds it. The attempt's follow
/// says so within moments as a rule; a refused report is the same news,
/// already paid for, should the follow have missed it.
fn stop_of_refusal(status: &tonic::Status) -> Option<Stop> {
    if status.code() == Code::NotFound {
        return Some(Stop::Gone);
    }
    if status.code() != Code::FailedPrecondition {
        return None;
    }
    let info = status.get_details_error_info()?;
    match info.reason.as_str() {
        REFUSED_TERMINAL => Some(
            // The service's word for the status (`TaskStatus` shown).
            if info.metadata.get(REFUSAL_STATUS_KEY).map(String::as_str) == Some("cancelled") {
                Stop::Cancelled
            } else {
                Stop::Finished
            },
        ),
        REFUSED_LEASE_LOST => Some(Stop::LeaseLost),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use tonic_types::ErrorDetails;

    fn refused(reason: &str, metadata: &[(&str, &str)]) -> tonic::Status {
        let metadata: HashMap<String, String> = metadata
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        tonic::Status::with_error_details(
            Code::FailedPrecondition,
            "refused",
            ErrorDetails::with_error_info(
                reason,
                taskstore_proto::protocol::REFUSAL_DOMAIN,
                metadata,
            ),
        )
    }

    #[test]
    fn a_refused_report_stops_the_attempt_only_when_the_attempt_is_over() {
        let cancelled = refused("FENCE_TERMINAL", &[("status", "cancelled")]);
        assert_eq!(stop_of_refusal(&cancelled), Some(Stop::Cancelled));
        let completed = refused("FENCE_TERMINAL", &[("status", "completed")]);
        assert_eq!(stop_of_refusal(&completed), Some(Stop::Finished));
        let lost = refused("FENCE_LEASE_LOST", &[]);
        assert_eq!(stop_of_refusal(&lost), Some(Stop::LeaseLost));
        let gone = tonic::Status::not_found("no such task");
        assert_eq!(stop_of_refusal(&gone), Some(Stop::Gone));
        // Anything else leaves the attempt running: an outage, a refusal
        // without details, one of another kind.
        assert_eq!(stop_of_refusal(&tonic::Status::unavailable("down")), None);
        assert_eq!(
            stop_of_refusal(&tonic::Status::failed_precondition("?")),
            None
        );
        assert_eq!(stop_of_refusal(&refused("HOLD_DISPATCHED", &[])), None);
    }
}
