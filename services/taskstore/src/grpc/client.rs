//! A [`TaskStore`] that talks to a remote `taskstore` service: callers cannot
//! tell it from a local backend (the conformance suite runs through it), and
//! the CLI is built on it. Its [`TaskStore`] methods are `client_task_store.rs`.

use std::time::Duration;

use taskstore_proto::credentials::{BearerToken, Credentials};
use taskstore_proto::endpoint::{ClientTls, InvalidEndpoint, parse_secure_endpoint, root_cause};
use taskstore_telemetry::grpc::ClientTracing;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use super::convert::{status_from_pb, task_from_pb};
use super::pb;
use super::pb::operations_client::OperationsClient;
use super::pb::task_store_client::TaskStoreClient;
use super::status::store_error_from_status;
use crate::domain::{JsonObject, Scope, TaskId, TaskResult, TaskStatus};
use crate::error::StoreError;

/// Results can be as large as the server allows; the client accepts them.
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// The gRPC client as a [`TaskStore`].
#[derive(Debug, Clone)]
pub struct GrpcTaskStore {
    client: TaskStoreClient<Traced>,
    operations: OperationsClient<Traced>,
}

/// A channel whose calls carry the caller's credentials (and the tenant
/// they act in) and the trace context, and get client spans.
pub type Traced = InterceptedService<ClientTracing<Channel>, Credentials>;

/// Why the client could not reach the service.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    Endpoint(#[from] InvalidEndpoint),
    #[error("cannot reach the taskstore service at {endpoint}: {reason}")]
    Unreachable { endpoint: String, reason: String },
}

impl GrpcTaskStore {
    /// Connects to `endpoint` (`http://127.0.0.1:50051`, or `host:port`)
    /// without credentials.
    pub async fn connect(endpoint: &str) -> Result<Self, ConnectError> {
        Self::connect_with(endpoint, BearerToken::none(), &ClientTls::default()).await
    }

    /// Connects to `endpoint`, presenting `credentials` on every call; an
    /// `https://` endpoint is reached over TLS as `tls` says.
    pub async fn connect_with(
        endpoint: &str,
        credentials: impl Into<Credentials>,
        tls: &ClientTls,
    ) -> Result<Self, ConnectError> {
        let parsed = parse_secure_endpoint(endpoint, tls)?;
        let channel = parsed
            .connect()
            .await
            .map_err(|err| ConnectError::Unreachable {
                endpoint: parsed.uri().to_string().trim_end_matches('/').to_owned(),
                reason: root_cause(&err),
            })?;
        Ok(Self::with_token(channel, credentials))
    }

    pub fn new(channel: Channel) -> Self {
        Self::with_token(channel, BearerToken::none())
    }

    pub fn with_token(channel: Channel, credentials: impl Into<Credentials>) -> Self {
        let channel = InterceptedService::new(ClientTracing::new(channel), credentials.into());
        let client = TaskStoreClient::new(channel.clone())
            .max_decoding_message_size(MAX_RESPONSE_BYTES)
            .max_encoding_message_size(MAX_RESPONSE_BYTES);
        Self {
            client,
            operations: OperationsClient::new(channel),
        }
    }

    pub(super) fn client(&self) -> TaskStoreClient<Traced> {
        self.client.clone()
    }

    /// The tools workers serve now (ListTools), by name.
    pub async fn list_tools(&self) -> Result<Vec<pb::ServedTool>, StoreError> {
        let response = self
            .client()
            .list_tools(pb::ListToolsRequest {})
            .await
            .map_err(store_error_from_status)?;
        Ok(response.into_inner().tools)
    }

    /// The service's view of its dependencies (Operations.GetStatus).
    pub async fn status(&self) -> Result<pb::GetStatusResponse, StoreError> {
        let response = self
            .operations
            .clone()
            .get_status(pb::GetStatusRequest {})
            .await
            .map_err(store_error_from_status)?;
        Ok(response.into_inner())
    }

    /// Lifts a key's back-off pause (LiftPause); whether it was paused.
    pub async fn lift_pause(&self, tool: &str, key: &str) -> Result<bool, StoreError> {
        let response = self
            .operations
            .clone()
            .lift_pause(pb::LiftPauseRequest {
                tool: tool.to_owned(),
                key: key.to_owned(),
            })
            .await
            .map_err(store_error_from_status)?;
        Ok(response.into_inner().lifted)
    }

    /// How the task is being run (GetTaskExecution); `None` from a service
    /// that keeps no such details (or predates them: a rolling upgrade).
    pub async fn task_execution(
        &self,
        scope: &Scope,
        task_id: &TaskId,
    ) -> Result<Option<pb::TaskExecutionState>, StoreError> {
        let request = pb::GetTaskRequest {
            task_id: task_id.to_string(),
            session_id: session_of(scope)?,
        };
        match self.client().get_task_execution(request).await {
            Ok(response) => Ok(Some(response.into_inner())),
            Err(status) if status.code() == tonic::Code::Unimplemented => Ok(None),
            Err(status) => Err(store_error_from_status(status)),
        }
    }

    /// GetTaskResult, waiting up to `wait` when given; the raw status on
    /// failure, so that callers can tell a deadline from other errors.
    pub(super) async fn fetch_result(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        wait: Option<Duration>,
    ) -> Result<Result<TaskResult, StoreError>, tonic::Status> {
        let mut request = tonic::Request::new(pb::GetTaskResultRequest {
            task_id: task_id.to_string(),
            session_id: match session_of(scope) {
                Ok(session) => session,
                Err(err) => return Ok(Err(err)),
            },
            wait: wait.is_some(),
        });
        if let Some(wait) = wait {
            request.set_timeout(wait);
        }
        let response = self.client().get_task_result(request).await?.into_inner();
        Ok(task_result_from_pb(response))
    }
}

pub(super) fn task_result_from_pb(
    response: pb::GetTaskResultResponse,
) -> Result<TaskResult, StoreError> {
    let task = task_from_pb(response.task.unwrap_or_default())?;
    if status_from_pb(response.status)? != task.status {
        return Err(StoreError::Internal(
            "the result's status disagrees with its task".into(),
        ));
    }
    let result = JsonObject::parse(response.result_json)
        .map_err(|err| StoreError::Internal(format!("malformed result from the server: {err}")))?;
    Ok(TaskResult { task, result })
}

/// The server decides the tenant from the caller's credentials; a client
/// cannot pick one.
pub(super) fn session_of(scope: &Scope) -> Result<Option<String>, StoreError> {
    if !scope.tenant.is_default() {
        return Err(StoreError::InvalidArgument(
            "the gRPC client acts for the tenant of its credentials; it cannot choose one".into(),
        ));
    }
    Ok(scope.session.as_ref().map(|s| s.to_string()))
}

pub(super) fn status_to_pb(status: TaskStatus) -> i32 {
    pb::TaskStatus::from(status).into()
}
